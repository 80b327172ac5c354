"""CepErrors raised inside Spark tasks reach the user as themselves, quietly.

Why here: a task's exception reaches the driver only as the text of Spark's
PythonException, and only when an action (collect, show, count, toPandas, write...) of
the returned DataFrame runs — possibly long after ``spark.cep.sql`` returned. pyspark
converts every JVM error of classic sessions (``pyspark.errors.exceptions.captured``) and
of Spark Connect (``pyspark.errors.exceptions.connect``) through one function,
``recover_python_exception``; wrapping it lets any error whose text carries cepsql's wire
line (errors.transported) come back as the CepError it was, with its position in the
user's SQL, while every other error passes through untouched. DataFrames stay plain
pyspark DataFrames.

Quiet console: in local mode the executor runs in the driver's JVM, and Spark logs each
failed task twice there (Executor ERROR and TaskSetManager WARN, both with the full
trace) before the driver raises. ``quiet_task_logs`` adds log4j filters that drop the
TaskSetManager lines carrying cepsql's wire tag and, in local mode, the Executor's
"Exception in task" duplicates (the TaskSetManager line still reports other errors).
The filters sit on the LoggerConfig handling those loggers (levels and appenders are
left as configured); in cluster mode executors log to their own files, not the console.

Spark's BigInteger overflow of a round (which the hook reports at the user's round call)
carries no wire tag: the JVM raises it in generated code, and its "Lost task" line says
only the stage, the task and the exception, never which query or expression it came
from, so no log4j filter can tell cepsql's round from a round in the user's own
``spark.sql``. Its filter is therefore added only once cepsql has generated a round that
overflows (``note_expression``): a session that never runs one keeps every such line;
after that, a user's own round overflow in the same JVM loses its "Lost task" trace
line too (its exception still reaches the user as Spark raised it).

Spark gives some run-time errors no query context at all (SMALLINT / TINYINT overflow,
unary minus and abs, integer CAST overflow, under ANSI): those are located by their words
(error class, operator, target type) against the expressions cepsql generated for the
newest statements (``error_position.message_culprits``). The same limit as for round
applies: such an error of the user's own ``spark.sql`` is reported at a matching
expression of cepsql's newest statement, when one has one.
"""
from __future__ import annotations

import uuid
from typing import Callable

from pyspark.errors import AnalysisException

from cepsql.algebra.expressions import walk
from cepsql.errors import WIRE_TAG, CepError, CepRuntimeError, decode_error, position_of
from cepsql.exprs.arrow_eval import round_overflow_error
from cepsql.runtime.error_position import message_culprits, sited_plan
from cepsql.backends.spark.spark_positions import context_offset, spark_message, user_offset

REMEMBERED_ATTR = "_cepsql_statements"  # on the SparkSession object: rewritten -> user text
EXPRESSIONS_ATTR = "_cepsql_expressions"  # generated expression text -> (user text, expr)
PENDING_ATTR = "_cepsql_pending_expressions"  # text -> expr, until remember_statement
OVERFLOWS_ATTR = "_cepsql_round_overflows"  # generated text -> located CepRuntimeError
PENDING_OVERFLOWS_ATTR = "_cepsql_pending_round_overflows"  # text -> error, unlocated
# what a JVM error says when Spark's round/bround meets a scale its BigInteger cannot hold
BIG_INTEGER_OVERFLOW = "BigInteger would overflow"
SITES_ATTR = "_cepsql_error_sites"  # a clause's error_site id -> how to locate its errors
REMEMBERED_MAX = 64

_HOOK_MARK = "_cepsql_hook"
EXECUTOR_LOGGER = "org.apache.spark.executor.Executor"
TASK_SET_LOGGER = "org.apache.spark.scheduler.TaskSetManager"


def install_error_hook() -> None:
    """Wrap pyspark's error conversion (classic and, when importable, Connect); idempotent."""
    import pyspark.errors.exceptions.captured as captured
    _wrap(captured)
    import importlib.util
    if importlib.util.find_spec("grpc") is None:
        return
    try:
        import pyspark.errors.exceptions.connect as connect
    except (Exception, SystemExit):  # pragma: no cover - incomplete Connect dependencies
        return
    _wrap(connect)


def _wrap(module) -> None:
    original = getattr(module, "recover_python_exception", None)
    if original is None or getattr(original, _HOOK_MARK, False):
        return

    def recover_python_exception(e):
        text = _text(e)
        found = _task_error(text) if WIRE_TAG in text else statement_error(e)
        return original(e) if found is None else found

    setattr(recover_python_exception, _HOOK_MARK, True)
    module.recover_python_exception = recover_python_exception


def remember_clause(spark, plan, locate: Callable[[CepError], CepError]):
    """plan, its worker configs marked with a new error_site id under which ``locate``
    (an error of the clause's tasks that knows no position -> the same error located in
    the user's text) is remembered on the session: a task has neither the text nor the
    clause's spec, so its DIVIDE_BY_ZERO in a DEFINE says only what went wrong."""
    site = uuid.uuid4().hex[:16]
    _remember(spark, SITES_ATTR, site, locate)
    return sited_plan(plan, site)


def _text(e) -> str:
    try:
        return str(e)
    except Exception:  # pragma: no cover - str() of a broken JVM error
        return ""


def _task_error(text: str) -> CepError | None:
    """The CepError a task sent (errors.transported), located through its clause's
    remembered error_site when it came without a position."""
    found = decode_error(text)
    site = getattr(found, "site", None)
    if found is None or site is None or found.line is not None:
        return found
    locate = _session_dict(SITES_ATTR).get(site)
    return found if locate is None else locate(found)


def _session_dict(attr: str) -> dict:
    """The active session's remembered dict ``attr`` ({} without one)."""
    try:
        from pyspark.sql import SparkSession
        return getattr(SparkSession.getActiveSession(), attr, None) or {}
    except Exception:  # noqa: BLE001  (no active session)
        return {}


def remember_statement(spark, rewritten: str, original: str) -> None:
    """Note that cepsql ran ``rewritten`` for the user's ``original`` text, so a run-time
    error Spark raises later (when an action runs) about the SQL around a clause (e.g.
    DIVIDE_BY_ZERO in a WHERE) is reported at the user's line:column. Kept on the session
    object, newest last, at most REMEMBERED_MAX statements."""
    pending = getattr(spark, PENDING_ATTR, None) or {}
    overflows = getattr(spark, PENDING_OVERFLOWS_ATTR, None) or {}
    for attr, notes in ((PENDING_ATTR, pending), (PENDING_OVERFLOWS_ATTR, overflows)):
        if notes:
            setattr(spark, attr, {})
    if rewritten == original:
        return
    _remember(spark, REMEMBERED_ATTR, rewritten, original)
    for text, expr in pending.items():
        _remember(spark, EXPRESSIONS_ATTR, text, (original, expr))
    for text, err in overflows.items():
        _remember(spark, OVERFLOWS_ATTR, text, err.with_sql(original))


def note_expression(text: str, expr) -> None:
    """Note an SQL text cepsql generated for an expression of the user's (a clause's
    MEASURES, its prepared DEFINE columns) that Spark evaluates: a run-time error Spark
    raises in it quotes only that text. remember_statement pairs the notes with the
    statement being run, so the error is reported at the expression's position. A round
    whose scale overflows Spark's BigInteger is noted with its error: Spark's
    ArithmeticException then quotes nothing at all."""
    pos = getattr(expr, "pos", None)
    if pos is None:
        return
    try:
        from pyspark.sql import SparkSession
        session = SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001  (no active session)
        return
    if session is None:
        return
    _remember(session, PENDING_ATTR, text, expr)
    overflow = next(filter(None, map(round_overflow_error, walk(expr))), None)
    if overflow is not None:
        if overflow.pos is None:
            overflow = CepRuntimeError(overflow.message, pos=pos)
        _remember(session, PENDING_OVERFLOWS_ATTR, text, overflow)
        quiet_round_overflows(session)


def _remember(spark, attr: str, key: str, value) -> None:
    """key -> value in the session object's dict ``attr``, newest last, at most
    REMEMBERED_MAX entries."""
    try:
        remembered = getattr(spark, attr, None)
        if remembered is None:
            remembered = {}
            setattr(spark, attr, remembered)
    except Exception:  # noqa: BLE001  (a session object that takes no attributes)
        return
    remembered.pop(key, None)
    remembered[key] = value
    while len(remembered) > REMEMBERED_MAX:
        remembered.pop(next(iter(remembered)))


def statement_error(e) -> CepError | None:
    """A Spark run-time error whose query context lies in a statement cepsql rewrote (or
    an expression it generated), as a CepRuntimeError located in the user's text; None for
    every other error (analysis errors included: they are raised while a statement is
    analyzed, and run_sql locates them itself)."""
    if getattr(e, "getQueryContext", None) is None or isinstance(e, AnalysisException):
        return None
    if BIG_INTEGER_OVERFLOW in _text(e):
        overflows = _session_dict(OVERFLOWS_ATTR)
        if not overflows:
            return None
        err = overflows[next(reversed(overflows))]
        return CepRuntimeError(err.message, sql=err.sql, pos=err.pos)
    remembered = _session_dict(REMEMBERED_ATTR)
    expressions = _session_dict(EXPRESSIONS_ATTR)
    for rewritten in reversed(list(remembered)):
        start = context_offset(e, rewritten)
        if start is not None:
            original = remembered[rewritten]
            pos, _ = user_offset(rewritten, original, start)
            return CepRuntimeError(spark_message(e), sql=original, pos=pos)
    for text in reversed(list(expressions)):
        if context_offset(e, text) is not None and _whole_text(e, text):
            original, expr = expressions[text]
            return CepRuntimeError(spark_message(e), sql=original, pos=expr.pos)
    return None if _has_context(e) else _error_by_message(e, expressions)


def _has_context(e) -> bool:
    try:
        return bool(e.getQueryContext())
    except Exception:  # noqa: BLE001  (a JVM error without contexts)
        return False


def _error_by_message(e, expressions: dict) -> CepRuntimeError | None:
    """A Spark run-time error without query context (SMALLINT overflow, unary minus,
    CAST overflow...) located by what its message says against the expressions cepsql
    generated, newest statement first: at the first expression that can have raised it,
    naming every candidate when several can."""
    message = spark_message(e)
    by_statement: dict[str, list] = {}
    for text in reversed(list(expressions)):
        original, expr = expressions[text]
        by_statement.setdefault(original, []).append(expr)
    for original, exprs in by_statement.items():
        culprits = sorted({n.pos for n in message_culprits(message, exprs)})
        if not culprits:
            continue
        if len(culprits) > 1:
            places = "; ".join("line {}, column {}".format(*position_of(original, p))
                               for p in culprits)
            message = f"{message} (in one of: {places})"
        return CepRuntimeError(message, sql=original, pos=culprits[0])
    return None


def _whole_text(e, text: str) -> bool:
    """Whether Spark's error quotes text as the whole SQL it evaluated (its query
    context summary shows the expression ``F.expr`` parsed), not a part of it."""
    try:
        summaries = [ctx.summary() for ctx in e.getQueryContext()]
    except Exception:  # noqa: BLE001
        return True
    return not summaries or any(f"\n{text}\n" in f"\n{s}\n" for s in summaries)


def quiet_task_logs(spark) -> bool:
    """Add the log4j filters described above to the driver's JVM.
    Returns whether they are in place; never fails the caller."""
    jvm, master = _driver_jvm(spark)
    if jvm is None:
        return False
    try:
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        tag = jvm.java.util.regex.Pattern.quote(WIRE_TAG.strip())
        _add_filter(jvm, config, TASK_SET_LOGGER, f"(?s).*{tag}.*")
        if master.startswith("local["):
            _add_filter(jvm, config, EXECUTOR_LOGGER, r"(?s)Exception in task .*")
        context.updateLoggers()
        return True
    except Exception:  # pragma: no cover - a logging backend other than log4j2
        return False


def quiet_round_overflows(spark) -> bool:
    """Drop the TaskSetManager's "Lost task" lines of Spark's BigInteger round overflow
    (see the module docstring for why this cannot be narrowed to cepsql's own rounds);
    called when cepsql generates such a round. Never fails the caller."""
    jvm, _ = _driver_jvm(spark)
    if jvm is None:
        return False
    try:
        context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
        _add_filter(jvm, context.getConfiguration(), TASK_SET_LOGGER,
                    f"(?s)Lost task .*ArithmeticException: {BIG_INTEGER_OVERFLOW}.*")
        context.updateLoggers()
        return True
    except Exception:  # pragma: no cover - a logging backend other than log4j2
        return False


def _driver_jvm(spark) -> tuple[object, str]:
    """(py4j JVM view, master) of the driver: a classic session's own, or — for Spark
    Connect — the local server pyspark started inside this process (``remote("local")``);
    (None, "") for a remote server, whose console is not the user's."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect sessions have no SparkContext
        from pyspark import SparkContext
        context = SparkContext._active_spark_context
    jvm = getattr(context, "_jvm", None)
    return (jvm, str(context.master)) if jvm is not None else (None, "")


def _add_filter(jvm, config, logger: str, regex: str) -> None:
    """A DENY filter for messages matching regex on the LoggerConfig that handles logger's
    events (usually the root one: levels and appenders stay as configured)."""
    core = jvm.org.apache.logging.log4j.core
    logger_config = config.getLoggerConfig(logger)
    filters = logger_config.getFilter()
    if filters is not None and regex in str(filters.toString()):
        return  # already added (spark.cep attached again, a second session on the JVM)
    result = core.Filter.Result
    deny = core.filter.RegexFilter.createFilter(regex, None, False, result.DENY, result.NEUTRAL)
    logger_config.addFilter(deny)
