"""CepSpark: sqlglot's Spark dialect plus our MATCH_RECOGNIZE clause parser.

sqlglot's own ``_parse_match_recognize`` keeps MEASURES/DEFINE as raw sqlglot trees and
the PATTERN as a string, without positions or RUNNING/FINAL on nested calls. We keep
sqlglot for what it does well (tokenizing Spark SQL, parsing scalar expressions) and
parse the clause structure ourselves, producing a ``MatchRecognizeSpec`` directly.

Inside the clause every function call is parsed as ``exp.Anonymous`` (except the few
with special syntax such as CAST) so names and argument order stay as written, and a
``RUNNING``/``FINAL`` word in front of a call is recorded in the call's meta.
"""
from __future__ import annotations

from dataclasses import replace

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, ParseError
from sqlglot.tokens import Token, TokenType

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.algebra.limits import MAX_PAREN_NESTING, ensure_recursion_budget
from cepsql.algebra.pattern import Negation, PatternNode, contains_negation, walk as walk_pattern
from cepsql.algebra.spec import MatchRecognizeSpec, Measure, PartitionKey, SkipTo, SortKey, Window
from cepsql.errors import CepAnalysisError, CepError, CepSyntaxError
from cepsql.parse.cep_clauses import rows_window, strategy_name, time_window
from cepsql.parse.pattern_parser import canonical_name, check_negation_placement, parse_pattern
from cepsql.parse.scanner import closing_paren, too_deep_paren
from cepsql.parse.to_algebra import SEMANTICS_KEY, SEMANTICS_POS_KEY, ToAlgebra, check_depth
from cepsql.parse.validate import NamePositions, check_input_expr, check_spec

__all__ = ["CepSpark", "CepSparkParser", "tokenize"]

# functions whose arguments have special syntax; all others are parsed as written
_SPECIAL_SYNTAX = frozenset({"CAST", "TRY_CAST", "EXTRACT", "SUBSTRING", "SUBSTR", "TRIM",
                             "POSITION", "OVERLAY"})
# words that start the next clause section; never taken as a measure name without AS
_SECTION_WORDS = frozenset({"ONE", "ALL", "AFTER", "STRATEGY", "PATTERN", "SUBSET", "DEFINE"})


class CepSparkParser(Spark.Parser):
    """Spark parser with the MATCH_RECOGNIZE clause parsed into a MatchRecognizeSpec."""

    _cep_active = False
    _cep_base = 0

    # --- sqlglot hooks ----------------------------------------------------------------
    def raise_error(self, message: str, token: Token | None = None) -> None:
        try:
            super().raise_error(message, token) if token else super().raise_error(message)
        except ParseError as err:
            err.cep_token = token or self._curr or self._prev  # type: ignore[attr-defined]
            err.cep_message = message  # type: ignore[attr-defined]
            raise

    def _at_semantics_prefix(self) -> bool:
        """``RUNNING f(`` / ``FINAL f(``: the word prefixes a call (not a column named so)."""
        tok = self._curr
        return (self._cep_active and tok.token_type == TokenType.VAR
                and tok.text.upper() in ("RUNNING", "FINAL")
                and bool(self._next)
                and self._next.token_type not in (TokenType.L_PAREN, TokenType.DOT)
                and self._index + 2 < self._tokens_size
                and self._tokens[self._index + 2].token_type == TokenType.L_PAREN)

    def _parse_column_parts_fast(self):
        if self._cep_active and self._curr and self._at_semantics_prefix():
            return None  # let the slow path reach _parse_function_call
        return super()._parse_column_parts_fast()

    def _parse_function_call(self, functions=None, anonymous=False, optional_parens=True,
                             any_token=False):
        tok = self._curr
        if not self._cep_active or not tok:
            return super()._parse_function_call(functions, anonymous, optional_parens, any_token)
        if self._at_semantics_prefix():
            index = self._index
            self._advance()
            result = self._parse_function_call(functions, anonymous, optional_parens, any_token)
            if result is None:
                self._retreat(index)
                return None
            result.meta[SEMANTICS_KEY] = tok.text.upper()
            result.meta[SEMANTICS_POS_KEY] = tok.start
            return result
        if self._next.token_type == TokenType.L_PAREN and tok.text.upper() not in _SPECIAL_SYNTAX:
            anonymous = True
        return super()._parse_function_call(functions, anonymous, optional_parens, any_token)

    def _parse_paren(self):
        """``()`` as an expression inside the clause is Spark's syntax error; sqlglot
        makes it an empty Tuple with no position, which no later stage could locate."""
        if (self._cep_active and self._curr and self._curr.token_type == TokenType.L_PAREN
                and self._next and self._next.token_type == TokenType.R_PAREN):
            raise CepSyntaxError("syntax error in MATCH_RECOGNIZE: empty parentheses are "
                                 "not an expression", pos=self._token_pos(self._curr))
        return super()._parse_paren()

    def _parse_match_recognize(self) -> exp.MatchRecognize | None:
        """Full-statement parsing: the clause becomes exp.MatchRecognize with meta['cep_spec']."""
        if not self._match(TokenType.MATCH_RECOGNIZE):
            return None
        if not self._match(TokenType.L_PAREN, advance=False):
            self.raise_error("Expecting (")
        close = closing_paren(self._tokens, self._index)
        if close is None:
            self.raise_error("MATCH_RECOGNIZE is missing its closing ')'")
        body = self._tokens[self._index + 1:close + 1]
        spec = type(self)(dialect=self.dialect).parse_clause(body, self.sql, wrapped=True)
        self._advance(close - self._index + 1)
        node = exp.MatchRecognize(alias=self._parse_table_alias())
        node.meta["cep_spec"] = spec
        return node

    # --- entry point ------------------------------------------------------------------
    def parse_clause(self, tokens: list[Token], sql: str, *, base: int = 0,
                     full_sql: str | None = None, wrapped: bool = True,
                     partition_by: list[PartitionKey] | None = None,
                     order_by: list[SortKey] | None = None,
                     input_name: str | None = None) -> MatchRecognizeSpec:
        """Parse a clause body from tokens of ``sql``.

        wrapped: the tokens end with the clause's closing ')'. base: offset of ``sql`` in
        ``full_sql``; errors carry full_sql and absolute positions. partition_by/order_by
        supplied from outside (table-function form) may not be repeated in the body.
        input_name: the input's alias or table name, which may qualify a PARTITION BY /
        ORDER BY column (``ORDER BY t.ts``).
        """
        return self._run(lambda: self._clause(wrapped, partition_by, order_by),
                         tokens, sql, base, full_sql, input_name)

    def parse_key(self, tokens: list[Token], sql: str, kind: str, *, base: int = 0,
                  full_sql: str | None = None) -> PartitionKey | SortKey:
        """One PARTITION BY (kind 'partition') or ORDER BY (kind 'order') item."""
        def run():
            key = self._partition_key() if kind == "partition" else self._sort_key()
            self._expect_end(False)
            return key
        return self._run(run, tokens, sql, base, full_sql)

    def _run(self, parse, tokens: list[Token], sql: str, base: int, full_sql: str | None,
             input_name: str | None = None):
        full_sql = sql if full_sql is None else full_sql
        self.reset()
        self._input_name = input_name
        self.sql = sql
        self.error_level = ErrorLevel.IMMEDIATE
        self._tokens = tokens
        self._tokens_size = len(tokens)
        self._index = -1
        self._advance()
        self._cep_active, self._cep_base = True, base
        self._conv = ToAlgebra(base)
        ensure_recursion_budget()
        try:
            deep = too_deep_paren(tokens, MAX_PAREN_NESTING)
            if deep is not None:
                raise CepSyntaxError(f"parentheses nested more than {MAX_PAREN_NESTING} deep "
                                     "(Spark's own limit is lower)", pos=self._token_pos(deep))
            return parse()
        except ParseError as err:
            raise self._syntax_error(err).with_sql(full_sql) from None
        except CepError as err:
            raise err.with_sql(full_sql) from None
        except RecursionError:  # a nesting the limits above do not count (e.g. NOT NOT ...)
            raise CepSyntaxError("expression nested too deeply", sql=full_sql,
                                 pos=self._token_pos(self._curr)) from None
        finally:
            self._cep_active = False

    # --- clause -----------------------------------------------------------------------
    def _clause(self, wrapped: bool, outer_partition, outer_order) -> MatchRecognizeSpec:
        first = self._curr
        partition: list[PartitionKey] = list(outer_partition or ())
        order: list[SortKey] = list(outer_order or ())
        if self._match(TokenType.PARTITION_BY):
            if outer_partition:
                self._fail("no PARTITION BY (it is given outside the pattern body)", back=1)
            partition = self._csv(self._partition_key)
        if self._match(TokenType.ORDER_BY):
            if outer_order:
                self._fail("no ORDER BY (it is given outside the pattern body)", back=1)
            order = self._csv(self._sort_key)
        measures: list[Measure] = []
        if self._match_text_seq("MEASURES"):
            measures = self._csv(self._measure)
            self._check_measure_names(measures)
        rows_tok, rows_index = self._curr, self._index
        rows, option = self._rows_per_match()
        output_pos = self._token_pos(rows_tok if self._index > rows_index else first)
        skip = self._after_match_skip()
        strategy = self._strategy()
        if not self._match_text_seq("PATTERN"):
            self._fail("PATTERN")
        pattern, pattern_text = self._pattern()
        check_negation_placement(pattern)
        if strategy is None and contains_negation(pattern):
            raise CepAnalysisError("NOT(...) needs CEP mode: add a STRATEGY clause before PATTERN",
                                   pos=_first_negation_pos(pattern))
        window = self._within()
        names = NamePositions()
        subsets: dict[str, tuple[str, ...]] = {}
        if self._match_text_seq("SUBSET"):
            for name, items in self._csv(lambda: self._subset(names)):
                subsets[name] = items
        defines: dict[str, Expr] = {}
        if self._match_text_seq("DEFINE"):
            for name, cond in self._csv(lambda: self._define(names)):
                defines[name] = cond
        self._expect_end(wrapped)
        spec = MatchRecognizeSpec(
            partition_by=tuple(partition), order_by=tuple(order), measures=tuple(measures),
            rows_per_match=rows, pattern=pattern, defines=defines, after_match_skip=skip,
            all_rows_option=option, subsets=subsets, strategy=strategy, window=window,
            pattern_text=pattern_text, output_pos=output_pos)
        check_spec(spec, names)
        return spec

    def _partition_key(self) -> PartitionKey:
        node, text = self._sqlglot_expr("a PARTITION BY expression")
        expr = check_input_expr(self._conv.convert(node), "PARTITION BY",
                                self._input_name)
        if isinstance(expr, ColumnRef):
            text = expr.column
        return PartitionKey(expr, text)

    def _sort_key(self) -> SortKey:
        node, _ = self._sqlglot_expr("an ORDER BY expression")
        expr = check_input_expr(self._conv.convert(node), "ORDER BY",
                                self._input_name)
        ascending = not self._match(TokenType.DESC)
        if ascending:
            self._match(TokenType.ASC)
        nulls_first = None
        if self._match_text_seq("NULLS", "FIRST"):
            nulls_first = True
        elif self._match_text_seq("NULLS", "LAST"):
            nulls_first = False
        return SortKey(expr, ascending, nulls_first)

    def _measure(self) -> Measure:
        node, _ = self._sqlglot_expr("a measure expression")
        expr = self._conv.convert(node)
        if self._match(TokenType.ALIAS):
            name, _ = self._name("a measure name after AS")
        elif self._is_name() and self._curr.text.upper() not in _SECTION_WORDS:
            name, _ = self._name("a measure name")
        else:
            raise CepSyntaxError("measure needs a name: write <expression> AS <name>",
                                 pos=self._conv.pos(node))
        return Measure(name, expr, self._conv.pos(node))

    def _check_measure_names(self, measures: list[Measure]) -> None:
        seen: set[str] = set()
        for m in measures:
            if m.name.lower() in seen:
                raise CepSyntaxError(f"duplicate measure name {m.name}", pos=m.pos)
            seen.add(m.name.lower())

    def _rows_per_match(self) -> tuple[str, str]:
        if self._match_text_seq("ONE", "ROW", "PER", "MATCH"):
            return "ONE", "SHOW_EMPTY"
        if not self._match_text_seq("ALL", "ROWS", "PER", "MATCH"):
            return "ONE", "SHOW_EMPTY"
        if self._match_text_seq("SHOW", "EMPTY", "MATCHES"):
            return "ALL", "SHOW_EMPTY"
        if self._match_text_seq("OMIT", "EMPTY", "MATCHES"):
            return "ALL", "OMIT_EMPTY"
        if self._match_text_seq("WITH", "UNMATCHED", "ROWS"):
            return "ALL", "WITH_UNMATCHED"
        return "ALL", "SHOW_EMPTY"

    def _after_match_skip(self) -> SkipTo:
        if not self._match_text_seq("AFTER"):
            return SkipTo()
        if not self._match_text_seq("MATCH", "SKIP"):
            self._fail("MATCH SKIP after AFTER")
        if self._match_text_seq("PAST", "LAST", "ROW"):
            return SkipTo("PAST_LAST_ROW", explicit=True)
        if self._match_text_seq("TO", "NEXT", "ROW"):
            return SkipTo("TO_NEXT_ROW", explicit=True)
        if not self._match_text_seq("TO"):
            self._fail("PAST LAST ROW, TO NEXT ROW, TO FIRST v, TO LAST v or TO v")
        kind = "TO_LAST"
        if self._curr.text.upper() in ("FIRST", "LAST") and self._next and \
                self._next.token_type != TokenType.R_PAREN and \
                self._next.text.upper() not in ("PATTERN", "STRATEGY"):
            kind = "TO_" + self._curr.text.upper()
            self._advance()
        var, pos = self._var_name("a pattern variable after AFTER MATCH SKIP TO")
        return SkipTo(kind, var, pos, explicit=True)

    def _strategy(self) -> str | None:
        """``STRATEGY name`` (CEP mode), or None when absent."""
        if not self._match_text_seq("STRATEGY"):
            return None
        tok = self._curr
        if not tok or tok.token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
            self._fail("a strategy name (STRICT_CONTIGUITY, PARTITION_CONTIGUITY, "
                       "SKIP_TILL_NEXT_MATCH or SKIP_TILL_ANY_MATCH)")
        self._advance()
        return strategy_name(tok.text, self._token_pos(tok))

    def _within(self) -> Window | None:
        """``WITHIN INTERVAL 'n' unit`` | ``WITHIN INTERVAL n unit`` | ``WITHIN n ROWS``."""
        if not self._match_text_seq("WITHIN"):
            return None
        at = self._token_pos(self._prev)
        return replace(self._window_size(), pos=at)

    def _window_size(self) -> Window:
        """What follows WITHIN."""
        if self._match(TokenType.INTERVAL):
            amount = self._curr
            if not amount or amount.token_type not in (TokenType.STRING, TokenType.NUMBER):
                self._fail("the interval amount, e.g. INTERVAL '20' MINUTE")
            self._advance()
            text, unit_tok = amount.text, self._curr
            if amount.token_type == TokenType.STRING and len(text.split()) == 2:
                text, unit_text = text.split()  # INTERVAL '20 minutes'
                return time_window(text, self._token_pos(amount), unit_text,
                                   self._token_pos(amount))
            if not unit_tok or unit_tok.token_type == TokenType.R_PAREN:
                self._fail("an interval unit (MILLISECOND, SECOND, MINUTE, HOUR or DAY)")
            self._advance()
            return time_window(text, self._token_pos(amount), unit_tok.text,
                               self._token_pos(unit_tok))
        count = self._curr
        if not count or count.token_type != TokenType.NUMBER:
            self._fail("INTERVAL '<n>' <unit> or <n> ROWS after WITHIN")
        self._advance()
        if not self._match_text_seq("ROWS") and not self._match_text_seq("ROW"):
            self._fail("ROWS after the WITHIN row count")
        return rows_window(count.text, self._token_pos(count))

    def _pattern(self):
        if not self._match(TokenType.L_PAREN, advance=False):
            self._fail("'(' after PATTERN")
        lparen = self._curr
        close = closing_paren(self._tokens, self._index)
        if close is None:
            raise CepSyntaxError("PATTERN is missing its closing ')'",
                                 pos=self._cep_base + lparen.start)
        rparen = self._tokens[close]
        text = self.sql[lparen.end + 1:rparen.start]
        node = parse_pattern(text, self._cep_base + lparen.end + 1)
        self._advance(close - self._index + 1)
        return node, text.strip()

    def _subset(self, names: NamePositions):
        name, pos = self._var_name("a SUBSET name")
        if name in names.subsets:
            raise CepSyntaxError(f"duplicate SUBSET {name}", pos=pos)
        if not self._match(TokenType.EQ):
            self._fail("'=' after the SUBSET name")
        if not self._match(TokenType.L_PAREN):
            self._fail("'(' starting the SUBSET variable list")
        items = self._csv(lambda: self._var_name("a pattern variable"))
        if not self._match(TokenType.R_PAREN):
            self._fail("',' or ')' in the SUBSET variable list")
        names.subsets[name] = pos
        names.subset_items[name] = items
        return name, tuple(v for v, _ in items)

    def _define(self, names: NamePositions):
        name, pos = self._var_name("a pattern variable to DEFINE")
        if name in names.defines:
            raise CepSyntaxError(f"duplicate DEFINE of {name}", pos=pos)
        names.defines[name] = pos
        if not self._match(TokenType.ALIAS):
            self._fail(f"AS after DEFINE {name}")
        node, _ = self._sqlglot_expr(f"a condition for {name}")
        return name, self._conv.convert(node)

    def _expect_end(self, wrapped: bool) -> None:
        tok = self._curr
        if wrapped:
            if tok and tok.token_type == TokenType.R_PAREN and self._index == self._tokens_size - 1:
                return
        elif not tok:
            return
        expected = "',' or ')'" if wrapped else "',' or the end of the text"
        self._fail(expected)

    # --- helpers ----------------------------------------------------------------------
    def _csv(self, item):
        items = [item()]
        while self._match(TokenType.COMMA):
            items.append(item())
        return items

    def _sqlglot_expr(self, what: str) -> tuple[exp.Expr, str]:
        start = self._curr
        if not start or start.token_type in (TokenType.R_PAREN, TokenType.COMMA):
            self._fail(what)
        node = self._parse_disjunction()
        if node is None:
            self._fail(what)
        check_depth(node, self._cep_base)
        return node, self.sql[start.start:self._prev.end + 1]

    def _is_name(self) -> bool:
        tok = self._curr
        return bool(tok) and (tok.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                              or tok.token_type in self.ID_VAR_TOKENS)

    def _name(self, what: str) -> tuple[str, int]:
        if not self._is_name():
            self._fail(what)
        tok = self._curr
        self._advance()
        return tok.text, self._cep_base + tok.start

    def _var_name(self, what: str) -> tuple[str, int]:
        tok = self._curr
        if tok and tok.token_type == TokenType.STRING and self.sql[tok.start] == '"':
            self._advance()
            return tok.text, self._cep_base + tok.start
        name, pos = self._name(what)
        return canonical_name(name, tok.token_type == TokenType.IDENTIFIER), pos

    def _fail(self, expected: str, back: int = 0) -> None:
        tok = self._tokens[self._index - back] if back else self._curr
        raise CepSyntaxError(f"syntax error in MATCH_RECOGNIZE: expected {expected}, "
                             f"found {self._describe(tok)}", pos=self._token_pos(tok))

    def _describe(self, tok: Token | None) -> str:
        if not tok:
            return "end of input"
        return repr(self.sql[tok.start:tok.end + 1])

    def _token_pos(self, tok: Token | None) -> int:
        if not tok:
            last = self._tokens[-1] if self._tokens else None
            return self._cep_base + (last.end + 1 if last else 0)
        return self._cep_base + tok.start

    def _syntax_error(self, err: ParseError) -> CepSyntaxError:
        tok = getattr(err, "cep_token", None) or self._curr
        message = getattr(err, "cep_message", None) or str(err).split(". Line")[0]
        if message.startswith("Required keyword"):
            message = "incomplete expression"
        return CepSyntaxError(f"syntax error in MATCH_RECOGNIZE: {message}, "
                              f"near {self._describe(tok)}", pos=self._token_pos(tok))


class CepSpark(Spark):
    """Spark with MATCH_RECOGNIZE as a keyword and our clause parser."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS = {**Spark.Tokenizer.KEYWORDS, "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE}

    Parser = CepSparkParser


def tokenize(sql: str) -> list[Token]:
    """CepSpark tokens of sql (offsets relative to sql); raises sqlglot TokenError."""
    return CepSpark().tokenize(sql)


def _first_negation_pos(node: PatternNode) -> int | None:
    """Position of the first NOT(...) in the pattern (for error messages)."""
    return next((n.pos for n in walk_pattern(node) if isinstance(n, Negation)), None)
