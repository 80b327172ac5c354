"""PATTERN grammar: our own tokenizer and recursive-descent parser.

sqlglot only delimits the PATTERN parentheses; the row-pattern regular expression
has its own lexical rules (``{-``, reluctant ``??``, ``$`` anchors) that a SQL
tokenizer gets wrong, so it is parsed here from the raw text. Every position is an
absolute character offset (``base`` + index in the text) so errors point into the
full SQL statement.

Grammar (SQL:2016 / Trino)::

    pattern     := alternation
    alternation := concat ('|' concat)*
    concat      := factor+
    factor      := primary quantifier?
    quantifier  := ('*' | '+' | '?' | '{' n? (',' m?)? '}') '?'?
    primary     := var | '(' ')' | '(' pattern ')' | '^' | '$'
                 | '{-' pattern '-}' | PERMUTE '(' pattern (',' pattern)* ')'
                 | cep_op

CEP mode operators (an operator name is a keyword only when '(' follows it, so a
variable may still be called ``seq``; ``seq (a)`` is the operator)::

    cep_op      := SEQ '(' pattern (',' pattern)* ')'      -> Concat (flattened)
                 | AND '(' pattern (',' pattern)* ')'      -> Permute
                 | OR '(' pattern (',' pattern)* ')'       -> Alternation (flattened)
                 | NOT '(' pattern ')'                     -> Negation
                 | KL '(' pattern (',' n (',' m?)?)? ')'   -> Quantified(n, m)
                                                     (default n=1, m unbounded)

``check_negation_placement`` then enforces where NOT may stand.
"""
from __future__ import annotations

from dataclasses import dataclass

from cepsql.algebra.pattern import (CEP_OPERATORS, Alternation, Anchor, Concat, Empty, Exclusion,
                               Negation, PatternNode, Permute, Quantified, Var, pattern_to_text,
                               walk as walk_pattern)
from cepsql.algebra.limits import MAX_PAREN_NESTING, MAX_QUANTIFIER_BOUND, ensure_recursion_budget
from cepsql.errors import CepSyntaxError, CepUnsupportedError

__all__ = ["parse_pattern", "pattern_to_text", "canonical_name", "check_negation_placement"]

_SYMBOLS = ("{-", "-}", "(", ")", "|", "*", "+", "?", "{", "}", ",", "^", "$")


@dataclass(frozen=True)
class _Tok:
    kind: str   # 'ident', 'qident', 'num', 'sym', 'end'
    text: str   # symbol text, identifier name (quotes removed), digits
    pos: int    # absolute offset
    raw: str = ""  # text as written (for error messages)


def canonical_name(name: str, quoted: bool) -> str:
    """Variable names: unquoted identifiers upper-cased, quoted ones kept as written."""
    return name if quoted else name.upper()


def _tokenize(text: str, base: int) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise CepSyntaxError("unterminated comment in PATTERN", pos=base + i)
            i = end + 2
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(_Tok("ident", text[i:j], base + i, text[i:j]))
            i = j
            continue
        if c.isdigit():
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            toks.append(_Tok("num", text[i:j], base + i, text[i:j]))
            i = j
            continue
        if c in "\"`":
            j, parts = i + 1, []
            while True:
                k = text.find(c, j)
                if k < 0:
                    raise CepSyntaxError("unterminated quoted identifier in PATTERN", pos=base + i)
                parts.append(text[j:k])
                if text.startswith(c * 2, k):  # doubled quote = literal quote
                    parts.append(c)
                    j = k + 2
                    continue
                j = k + 1
                break
            name = "".join(parts)
            if not name:
                raise CepSyntaxError("empty quoted identifier in PATTERN", pos=base + i)
            toks.append(_Tok("qident", name, base + i, text[i:j]))
            i = j
            continue
        for sym in _SYMBOLS:
            if text.startswith(sym, i):
                toks.append(_Tok("sym", sym, base + i, sym))
                i += len(sym)
                break
        else:
            raise CepSyntaxError(f"unexpected character {c!r} in PATTERN", pos=base + i)
    toks.append(_Tok("end", "", base + n, "end of PATTERN"))
    return toks


class _Parser:
    def __init__(self, toks: list[_Tok]):
        self.toks = toks
        self.i = 0

    @property
    def cur(self) -> _Tok:
        return self.toks[self.i]

    def at(self, sym: str) -> bool:
        return self.cur.kind == "sym" and self.cur.text == sym

    def take(self, sym: str) -> _Tok:
        tok = self.cur
        if not self.at(sym):
            self.fail(f"expected '{sym}'")
        self.i += 1
        return tok

    def fail(self, what: str) -> None:
        tok = self.cur
        found = "end of PATTERN" if tok.kind == "end" else repr(tok.raw)
        raise CepSyntaxError(f"syntax error in PATTERN: {what}, found {found}", pos=tok.pos)

    # alternation := concat ('|' concat)*
    def alternation(self) -> PatternNode:
        items = [self.concat()]
        while self.at("|"):
            self.i += 1
            items.append(self.concat())
        return _flatten(Alternation, items)

    def _starts_primary(self) -> bool:
        tok = self.cur
        return tok.kind in ("ident", "qident") or (
            tok.kind == "sym" and tok.text in ("(", "^", "$", "{-"))

    def concat(self) -> PatternNode:
        if not self._starts_primary():
            self.fail("expected a pattern variable or '('")
        items = []
        while self._starts_primary():
            items.append(self.factor())
        return _flatten(Concat, items)

    def factor(self) -> PatternNode:
        node = self.primary()
        tok = self.cur
        if tok.kind != "sym" or tok.text not in ("*", "+", "?", "{"):
            return node
        self.i += 1
        if tok.text == "*":
            lo, hi = 0, None
        elif tok.text == "+":
            lo, hi = 1, None
        elif tok.text == "?":
            lo, hi = 0, 1
        else:
            lo, hi = self.bounds(tok)
        greedy = True
        if self.at("?"):
            self.i += 1
            greedy = False
        if self.cur.kind == "sym" and self.cur.text in ("*", "+", "?", "{"):
            self.fail("a quantifier cannot follow a quantifier (use parentheses)")
        return Quantified(node, lo, hi, greedy)

    def bounds(self, brace: _Tok) -> tuple[int, int | None]:
        lo = self.number()
        if self.at("}"):
            self.i += 1
            if lo is None:
                raise CepSyntaxError("empty quantifier {}", pos=brace.pos)
            hi = lo
        else:
            lo, hi = self._range_bounds(brace, lo)
        if hi == 0:  # SQL:2016 (as Trino applies it): the upper bound is at least 1
            raise CepSyntaxError("quantifier upper bound must be at least 1", pos=brace.pos)
        return lo, hi

    def _range_bounds(self, brace: _Tok, lo: int | None) -> tuple[int, int | None]:
        """The rest of ``{n,m}`` / ``{n,}`` / ``{,m}`` after n."""
        if not self.at(","):
            self.fail("expected ',' or '}' in the quantifier")
        self.i += 1
        hi = self.number()
        if not self.at("}"):
            self.fail("expected '}' closing the quantifier")
        self.i += 1
        lo = 0 if lo is None else lo
        if hi is not None and lo > hi:
            raise CepSyntaxError(
                f"quantifier lower bound {lo} exceeds upper bound {hi}", pos=brace.pos)
        return lo, hi

    def number(self) -> int | None:
        if self.cur.kind != "num":
            return None
        value = int(self.cur.text)
        if value > MAX_QUANTIFIER_BOUND:  # one rule for both modes (see algebra.limits)
            raise CepUnsupportedError(
                f"quantifier bound {self.cur.text} is too large (at most {MAX_QUANTIFIER_BOUND})",
                pos=self.cur.pos)
        self.i += 1
        return value

    def primary(self) -> PatternNode:
        tok = self.cur
        if tok.kind == "ident" and tok.text.upper() == "PERMUTE" and self._next_is("("):
            self.i += 2
            items = [self.alternation()]
            while self.at(","):
                self.i += 1
                items.append(self.alternation())
            self.take(")")
            return Permute(tuple(items), tok.pos)
        if tok.kind == "ident" and tok.text.upper() in CEP_OPERATORS and self._next_is("("):
            return self.cep_operator(tok)
        if tok.kind in ("ident", "qident"):
            self.i += 1
            return Var(canonical_name(tok.text, tok.kind == "qident"), tok.pos)
        self.i += 1
        if tok.text == "^":
            return Anchor("start")
        if tok.text == "$":
            return Anchor("end")
        if tok.text == "{-":
            inner = self.alternation()
            self.take("-}")
            return Exclusion(inner, tok.pos)
        # '('
        if self.at(")"):
            self.i += 1
            return Empty()
        inner = self.alternation()
        self.take(")")
        return inner

    def cep_operator(self, tok: _Tok) -> PatternNode:
        """SEQ/AND/OR/NOT/KL '(' ... ')' (the name token is current, '(' follows)."""
        name = tok.text.upper()
        self.i += 2
        items = [self.alternation()]
        if name == "KL":
            return self.kleene(tok, items[0])
        while self.at(","):
            self.i += 1
            items.append(self.alternation())
        self.take(")")
        if name == "NOT":
            if len(items) != 1:
                raise CepSyntaxError("NOT takes exactly one pattern", pos=tok.pos)
            return Negation(items[0], tok.pos)
        if name == "SEQ":
            return _flatten(Concat, items)
        if name == "OR":
            return _flatten(Alternation, items)
        return items[0] if len(items) == 1 else Permute(tuple(items), tok.pos)

    def kleene(self, tok: _Tok, child: PatternNode) -> PatternNode:
        """KL(p) = p+; KL(p, n) = p{n,}; KL(p, n, m) = p{n,m}; KL(p, n, ) = p{n,}."""
        lo, hi = 1, None
        if self.at(","):
            self.i += 1
            lo = self.number()
            if lo is None:
                self.fail("expected the KL lower bound (a non-negative integer)")
            if self.at(","):
                self.i += 1
                hi = self.number()
        if not self.at(")"):
            self.fail("expected ',' or ')' in KL(pattern, min, max)")
        self.i += 1
        if hi is not None and lo > hi:
            raise CepSyntaxError(f"KL lower bound {lo} exceeds upper bound {hi}", pos=tok.pos)
        if hi == 0:
            raise CepSyntaxError("KL upper bound must be at least 1", pos=tok.pos)
        return Quantified(child, lo, hi, True)

    def _next_is(self, sym: str) -> bool:
        nxt = self.toks[self.i + 1]
        return nxt.kind == "sym" and nxt.text == sym


def _flatten(kind, items: list[PatternNode]) -> PatternNode:
    if len(items) == 1:
        return items[0]
    flat: list[PatternNode] = []
    for item in items:
        flat.extend(item.items if isinstance(item, kind) else (item,))
    return kind(tuple(flat))


def parse_pattern(text: str, base: int = 0) -> PatternNode:
    """Parse the text between PATTERN's parentheses; ``base`` is its offset in the SQL."""
    toks = _tokenize(text, base)
    _check_nesting(toks)
    parser = _Parser(toks)
    if parser.cur.kind == "end":
        raise CepSyntaxError("empty PATTERN (write PATTERN (()) for the empty pattern)",
                             pos=parser.cur.pos)
    ensure_recursion_budget()
    node = parser.alternation()
    if parser.cur.kind != "end":
        parser.fail("expected '|', a pattern variable or the end of PATTERN")
    return node


def _check_nesting(toks: list[_Tok]) -> None:
    """CepSyntaxError at the first group nested more than MAX_PAREN_NESTING deep."""
    depth = 0
    for tok in toks:
        if tok.kind == "sym" and tok.text in ("(", "{-"):
            depth += 1
            if depth > MAX_PAREN_NESTING:
                raise CepSyntaxError(f"PATTERN groups nested more than {MAX_PAREN_NESTING} "
                                     "deep", pos=tok.pos)
        elif tok.kind == "sym" and tok.text in (")", "-}"):
            depth -= 1


def check_negation_placement(node: PatternNode) -> None:
    """NOT(p) may only be an item of a SEQ/concatenation or of an AND, next to at least
    one positive item, and may not contain another NOT; raises CepSyntaxError at the NOT."""
    if isinstance(node, Negation):
        raise CepSyntaxError("NOT(...) cannot be the whole pattern: it needs a positive "
                             "neighbour in a SEQ or AND", pos=node.pos)
    _check_negations(node)


def _check_negations(node: PatternNode) -> None:
    if isinstance(node, (Concat, Permute)):
        negations = [i for i in node.items if isinstance(i, Negation)]
        if negations and len(negations) == len(node.items):
            raise CepSyntaxError("a SEQ or AND made only of NOT(...) items matches nothing; "
                                 "add a positive item", pos=negations[0].pos)
        for item in node.items:
            if isinstance(item, Negation):
                _no_inner_negation(item.child)
            else:
                _check_negations(item)
        return
    children = node.items if isinstance(node, Alternation) else (
        (node.child,) if isinstance(node, (Quantified, Exclusion)) else ())
    for child in children:
        if isinstance(child, Negation):
            where = "an OR/alternation" if isinstance(node, Alternation) else (
                "a KL/quantifier" if isinstance(node, Quantified) else "an exclusion")
            raise CepSyntaxError(f"NOT(...) cannot stand directly inside {where}; "
                                 "use it as an item of SEQ or AND", pos=child.pos)
        _check_negations(child)


def _no_inner_negation(node: PatternNode) -> None:
    for n in walk_pattern(node):
        if isinstance(n, Negation):
            raise CepSyntaxError("NOT(...) cannot be nested inside NOT(...)", pos=n.pos)
