"""The pattern tree's one traversal (algebra.pattern: children / walk / transform), which
the compilers, the streaming backend, the parser checks and the reference evaluators use
instead of their own recursive walks."""
from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                                    Permute, Quantified, Var, children, contains_negation,
                                    pattern_variables, transform, walk)
from cepsql.reference.pattern import expand_permutations

A, B, C, D = Var("A", 0), Var("B", 2), Var("C", 4), Var("D", 6)
TREE = Concat((Anchor("start"), Alternation((A, Exclusion(B, 10))),
               Quantified(Permute((C, Empty()), 20), 1, None),
               Negation(D, 30)))


def test_children_of_every_node_kind():
    assert children(A) == children(Empty()) == children(Anchor("end")) == ()
    assert children(TREE) == TREE.items
    assert children(Exclusion(B)) == children(Negation(B)) == children(Quantified(B, 0, 1)) == (B,)
    assert children(Permute((A, B))) == (A, B)


def test_walk_is_pre_order_and_enters_every_kind():
    kinds = [type(n).__name__ for n in walk(TREE)]
    assert kinds == ["Concat", "Anchor", "Alternation", "Var", "Exclusion", "Var", "Quantified",
                     "Permute", "Var", "Empty", "Negation", "Var"]
    assert pattern_variables(TREE) == ["A", "B", "C", "D"]
    assert contains_negation(TREE) and not contains_negation(TREE.items[1])


def test_transform_is_bottom_up_and_keeps_positions():
    seen = []

    def rename(n):
        seen.append(type(n).__name__)
        return Var(n.name.lower(), n.pos) if isinstance(n, Var) else n
    out = transform(TREE, rename)
    assert seen[:3] == ["Anchor", "Var", "Var"] and seen[-1] == "Concat"
    assert pattern_variables(out) == ["a", "b", "c", "d"]
    assert [n.pos for n in walk(out) if isinstance(n, (Exclusion, Permute, Negation))] == [10, 20, 30]
    assert transform(TREE, lambda n: n) is TREE  # nothing changed: the same objects


def test_expand_permutations_through_transform():
    pattern = Exclusion(Permute((A, B), 5), 7)
    expanded = expand_permutations(pattern)
    assert expanded == Exclusion(Alternation((Concat((A, B)), Concat((B, A)))))
    assert expanded.pos == 7  # the exclusion's position survives the rewrite
    assert expand_permutations(Permute((A, B)), keep_single_path=True) == Permute((A, B))
    assert expand_permutations(Permute((A,))) == A
