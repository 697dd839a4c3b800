"""runtime/state/variables.py: dictionaries whose values are vectors or dictionaries, kept in the
bucket's state store entry by entry, against the pickled layout: the same random batches (a
replayed one among them) through both give the same observations and the same object graph,
sharing included (Hypothesis)."""
import pickle
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccl.splash.types import INTEGER, STRING, Type
from ccl.splash.values import Dictionary, Vector
from runtime.state import BucketStore, create
from runtime.state.variables import HeldDictionary, StoredDictionary, attach, detach

VEC = Type("vector", (INTEGER,))
NEST = Type("dictionary", (STRING, VEC))
KEYS = st.sampled_from(["a", "b", "c", "d"])
SMALL = st.integers(0, 9)
OPS = st.one_of(
    st.tuples(st.just("new"), KEYS, SMALL),        # d[k] := [x]
    st.tuples(st.just("push"), KEYS, SMALL),       # push_back(d[k], x)
    st.tuples(st.just("local"), KEYS),             # l := d[k] (a local of the batch)
    st.tuples(st.just("push_local"), SMALL),       # push_back(l, x), later in the batch
    st.tuples(st.just("hold"), KEYS),              # v := d[k] (a variable: kept across batches)
    st.tuples(st.just("push_held"), SMALL),        # push_back(v, x)
    st.tuples(st.just("unhold"),),                 # v := new vector
    st.tuples(st.just("copy"), KEYS, KEYS),        # d[k2] := d[k1] (two entries share)
    st.tuples(st.just("cross"), KEYS),             # e[k] := d[k] (two dictionaries share)
    st.tuples(st.just("fromvar"), KEYS),           # d[k] := v
    st.tuples(st.just("remove"), KEYS),
    st.tuples(st.just("clear"),),
    st.tuples(st.just("nest"), KEYS, KEYS, SMALL),  # push_back(n[k][j], x), made when absent
    st.tuples(st.just("nest_take"), KEYS, KEYS),    # n[k][j] := d[j] (a vector in two levels)
    st.tuples(st.just("replace"),),                # d := new dictionary
    st.tuples(st.just("share"),),                  # e := d
    st.tuples(st.just("peek"), KEYS),
    st.tuples(st.just("walk"),),                   # for (k in d) ...
)


def _fresh() -> dict:
    return {0: {"vars": {"d": Dictionary((), STRING, VEC), "e": Dictionary((), STRING, VEC),
                         "n": Dictionary((), STRING, NEST), "v": Vector((), INTEGER)}}}


def _apply(values: dict, ops: list) -> list:
    """Run ``ops`` on a Flex instance's variables as the interpreter would (containers shared by
    assignment, changed in place); what the batch observes."""
    seen: list = []
    local = None
    for op in ops:
        d, kind = values["d"], op[0]
        if kind == "new":
            d[op[1]] = Vector([op[2]], INTEGER)
        elif kind == "push" and d.get(op[1]) is not None:
            d[op[1]].append(op[2])
        elif kind == "local":
            local = d.get(op[1])
        elif kind == "push_local" and local is not None:
            local.append(op[1])
        elif kind == "hold" and d.get(op[1]) is not None:
            values["v"] = d[op[1]]
        elif kind == "push_held":
            values["v"].append(op[1])
        elif kind == "unhold":
            values["v"] = Vector((), INTEGER)
        elif kind == "copy" and d.get(op[1]) is not None:
            d[op[2]] = d[op[1]]
        elif kind == "cross" and d.get(op[1]) is not None:
            values["e"][op[1]] = d[op[1]]
        elif kind == "fromvar":
            d[op[1]] = values["v"]
        elif kind == "remove":
            d.pop(op[1], None)
        elif kind == "clear":
            d.clear()
        elif kind == "nest":
            n = values["n"]
            if n.get(op[1]) is None:
                n[op[1]] = Dictionary((), STRING, VEC)
            if n[op[1]].get(op[2]) is None:
                n[op[1]][op[2]] = Vector((), INTEGER)
            n[op[1]][op[2]].append(op[3])
        elif kind == "nest_take" and d.get(op[2]) is not None:
            n = values["n"]
            if n.get(op[1]) is None:
                n[op[1]] = Dictionary((), STRING, VEC)
            n[op[1]][op[2]] = d[op[2]]
        elif kind == "replace":
            values["d"] = Dictionary((), STRING, VEC)
        elif kind == "share":
            values["e"] = d
        elif kind == "peek":
            seen.append((op[1], list(d.get(op[1]) or []), len(d)))
        elif kind == "walk":
            seen.append([(k, list(d[k])) for k in d])
    return seen


def _graph(values: dict) -> list:
    """The variables as nested lists, each container tagged with the order it was first met in
    (so two runs compare equal only when they share the same objects)."""
    ids: dict[int, int] = {}

    def walk(v):
        if isinstance(v, (list, dict)):
            first = id(v) not in ids
            tag = ids.setdefault(id(v), len(ids))
            if not first:
                return ("same", tag)
            if isinstance(v, dict):
                return ("dict", tag, [(k, walk(x)) for k, x in v.items()])
            return ("vec", tag, [walk(x) for x in v])
        return v
    return [(name, walk(values[name])) for name in sorted(values)]


def _pickled_batch(before: bytes, ops: list) -> tuple[list, bytes]:
    states = pickle.loads(before)
    seen = _apply(states[0]["vars"], ops)
    return seen, pickle.dumps(states)


def _stored_batch(root: str, before: bytes, batch_id: int, ops: list) -> tuple[list, bytes]:
    states = pickle.loads(before)
    with BucketStore.open(root, 0) as store:
        store.begin(batch_id)
        attached = attach(states, store)
        seen = _apply(states[0]["vars"], ops)
        detach(states, store, attached)
        after = pickle.dumps(states)
        store.commit(batch_id)
    return seen, after


def _stored_graph(root: str, state: bytes, batch_id: int) -> list:
    """The variables the store and the state ``state`` hold after ``batch_id``, read out whole
    (in a batch not committed)."""
    states = pickle.loads(state)
    with BucketStore.open(root, 0) as store:
        store.begin(batch_id + 1)
        attach(states, store)
        values = states[0]["vars"]
        for name, v in values.items():
            if isinstance(v, StoredDictionary):
                values[name] = v.plain()
        return _graph(values)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(OPS, max_size=12), min_size=1, max_size=5),
       replayed=st.integers(0, 4))
def test_store_and_pickled_layout_agree(batches, replayed):
    """Every batch observes the same values through the store as through the pickled layout,
    and leaves the same object graph (sharing included); batch ``replayed`` runs twice (a
    crash after its commit), the second run starting from the state before it."""
    with tempfile.TemporaryDirectory() as tmp:
        root = tmp + "/root"
        create(root, 1)
        base = pickle.dumps(_fresh())
        pickled, stored = [base], [base]
        order = list(range(len(batches)))
        if replayed < len(batches):
            order.insert(replayed + 1, replayed)
        for b in order:
            seen_p, after_p = _pickled_batch(pickled[b], batches[b])
            seen_s, after_s = _stored_batch(root, stored[b], b, batches[b])
            assert seen_s == seen_p, (b, batches[b])
            del pickled[b + 1:], stored[b + 1:]
            pickled.append(after_p)
            stored.append(after_s)
            assert _stored_graph(root, after_s, b) == _graph(pickle.loads(after_p)[0]["vars"])


def test_unshared_dictionaries_of_vectors_stay_in_the_store(tmp_path):
    """A dictionary of vectors no other place holds is kept by entry; a batch that changes one
    vector in place through a local writes that entry only."""
    root = str(tmp_path / "root")
    create(root, 1)
    states = _fresh()
    states[0]["vars"]["d"].update((f"k{i}", Vector([i], INTEGER)) for i in range(100))
    with BucketStore.open(root, 0) as store:
        store.begin(0)
        detach(states, store, attach(states, store))
        store.commit(0)
        assert states[0]["vars"]["d"] == HeldDictionary(100, 100, STRING, VEC)
        written = []
        put = store.put
        store.put = lambda ns, key, value, **kw: (written.append((ns, key, value)),
                                                  put(ns, key, value, **kw))
        put_all = store.put_all

        def spy_put_all(ns, inst, items, **kw):
            items = list(items)
            written.extend((ns, (inst, *key), value) for key, value in items)
            put_all(ns, inst, items, **kw)
        store.put_all = spy_put_all
        store.begin(1)
        attached = attach(states, store)
        local = states[0]["vars"]["d"]["k7"]
        local.append(70)
        detach(states, store, attached)
        store.commit(1)
        assert written == [("v.d", (0, "k7"), (7, "k7", (7, 70)))]  # packed: no Type pickled
        store.begin(2)
        attach(states, store)
        back = states[0]["vars"]["d"]["k7"]
        assert back == [7, 70] and type(back) is Vector and back.elem == INTEGER
        assert len(states[0]["vars"]["d"]) == 100


def test_containers_are_packed_by_their_declared_types():
    """Vectors and dictionaries of the declared types go to the store as tuples and come back
    with those types; one of other types is kept as it is."""
    from runtime.state.variables import _pack, _unpack
    deep = Type("dictionary", (STRING, NEST))
    inner = Dictionary([("x", Vector([1, 2], INTEGER))], STRING, VEC)
    value = Dictionary([("a", inner)], STRING, NEST)
    packed = _pack(value, deep)
    assert packed == (("a", (("x", (1, 2)),)),)
    back = _unpack(packed, deep)
    assert back == value and type(back) is Dictionary and (back.key, back.value) == (STRING, NEST)
    assert type(back["a"]["x"]) is Vector and back["a"]["x"].elem == INTEGER
    odd = Vector([1.5], Type("float"))
    assert _pack(odd, VEC) is odd and _unpack(odd, VEC) is odd
