"""Statistics stage: per-variable arrival rates and pairwise predicate selectivities
estimated from (a bounded sample of) the input, cached per input and pattern;
backend-neutral (a Spark DataFrame is only sampled, ``spark_sample``). May import
``analyze``, ``parse``/``exprs``, ``algebra`` and ``errors``.

    from cepsql.stats import CACHE, estimate_from_spark
    stats = CACHE.get_or_estimate(spec, df)            # or estimate_from_spark(spec, df)
    stats.rates["A"], stats.selectivities[("A", "B")]
"""
from cepsql.stats.cache import CACHE, StatisticsCache
from cepsql.stats.estimate import (estimate_from_spark, estimate_from_table, estimate_prepared,
                                   unary_fractions)
from cepsql.stats.model import PatternStatistics

__all__ = ["CACHE", "PatternStatistics", "StatisticsCache", "estimate_from_spark",
           "estimate_from_table", "estimate_prepared", "unary_fractions"]
