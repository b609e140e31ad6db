"""`kubedra explain KIND[.FIELD...]`: field documentation, as `kubectl explain` prints it.

The text is kubedra's own, written for its models (not copied from Kubernetes' Go doc
comments or OpenAPI descriptions): a model's docstring describes its type and the string
literal right under each field (an attribute docstring) describes the field; a field
without one shows `<no description>` (tests/cli/test_explain_fields.py requires one for
every field). The layout is kubectl's plaintext template: GROUP/KIND/VERSION, FIELD with
its type, DESCRIPTION (the field's text, then its type's), and FIELDS, each with its type
and text, paragraphs joined and wrapped at 80 columns as the OpenAPI generator and kubectl
do.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import sys
from dataclasses import dataclass
from typing import Any

import msgspec.inspect as mi

from kubedra.api.meta import KubeObject, Model
from kubedra.api.quantity import Quantity

WIDTH = 76  # kubectl wraps descriptions at 76 columns, indented by 4

# Upstream's OpenAPI `required` lists (Kubernetes 1.37) for the fields kubedra models with a
# default (msgspec's own `required` covers the others): kubectl marks them `-required-`.
REQUIRED: frozenset[tuple[str, str]] = frozenset(
    (model, field)
    for model, fields in {
        "AllocatedDeviceStatus": ("device", "driver", "pool"),
        "CELDeviceSelector": ("expression",),
        "CapacityRequestPolicyRange": ("min",),
        "CompositeGangSchedulingPolicy": ("minGroupCount",),
        "CompositePodGroupTemplate": ("name", "schedulingPolicy"),
        "Condition": ("lastTransitionTime", "message", "reason", "status", "type"),
        "Container": ("name",),
        "ContainerExtendedResourceRequest": ("containerName", "requestName", "resourceName"),
        "Counter": ("value",),
        "CounterSet": ("counters", "name"),
        "Device": ("name",),
        "DeviceAllocationConfiguration": ("source",),
        "DeviceCapacity": ("value",),
        "DeviceCounterConsumption": ("counterSet", "counters"),
        "DeviceDerivedAttribute": ("expression", "name"),
        "DeviceRequest": ("name",),
        "DeviceRequestAllocationResult": ("device", "driver", "pool", "request"),
        "DeviceSubRequest": ("deviceClassName", "name"),
        "DeviceTaint": ("effect", "key"),
        "DeviceTaintRule": ("spec",),
        "DeviceTaintRuleSpec": ("taint",),
        "ExactDeviceRequest": ("deviceClassName",),
        "GangSchedulingPolicy": ("minCount",),
        "NodeCondition": ("status", "type"),
        "NodeSelector": ("nodeSelectorTerms",),
        "NodeSelectorRequirement": ("key", "operator"),
        "OpaqueDeviceConfiguration": ("driver", "parameters"),
        "OwnerReference": ("apiVersion", "kind", "name", "uid"),
        "PodCondition": ("status", "type"),
        "PodExtendedResourceClaimStatus": ("requestMappings", "resourceClaimName"),
        "PodGroup": ("spec",),
        "PodGroupResourceClaim": ("name",),
        "PodGroupResourceClaimStatus": ("name",),
        "PodGroupSpec": ("schedulingPolicy",),
        "PodGroupTemplate": ("name", "schedulingPolicy"),
        "PodResourceClaim": ("name",),
        "PodResourceClaimStatus": ("name",),
        "PodSpec": ("containers",),
        "PreferredSchedulingTerm": ("preference", "weight"),
        "ResourceClaimConsumerReference": ("name", "resource", "uid"),
        "ResourceClaimRef": ("name",),
        "ResourcePool": ("generation", "name", "resourceSliceCount"),
        "ResourceSlice": ("spec",),
        "ResourceSliceSpec": ("driver", "pool"),
        "Taint": ("effect", "key"),
        "TopologyConstraint": ("key",),
        "TypedLocalObjectReference": ("kind", "name"),
        "Workload": ("spec",),
        "WorkloadReference": ("templateName", "workloadName"),
    }.items()
    for field in fields
)


@dataclass(frozen=True)
class Field:
    name: str  # as on the wire
    type: Any  # msgspec.inspect type
    doc: str
    required: bool
    type_name: str  # kubectl's hint: `string`, `[]DeviceRequest`, ...


# Free-form fields, which upstream types by name
_FREE_FORM = {
    ("ManagedFieldsEntry", "fieldsV1"): "FieldsV1",
    ("OpaqueDeviceConfiguration", "parameters"): "RawExtension",
    ("AllocatedDeviceStatus", "data"): "RawExtension",
}


def explain_fields(cls: type[KubeObject], path: list[str], recursive: bool = False) -> str:
    """The documentation of `cls` or of the field at `path` (wire names) under it;
    KeyError naming the first segment that is no field, as kubectl words it."""
    header = _header(cls)
    tp: Any = mi.type_info(cls)
    field: Field | None = None
    for name in path:
        found = {f.name: f for f in fields_of(tp)}.get(name)
        if found is None:
            raise KeyError(f'field "{name}" does not exist')
        field, tp = found, found.type
    text = header
    if field is not None:
        text += f"FIELD: {field.name} <{field.type_name}>\n\n\n"
    doc = "".join(d + "\n" for d in (field.doc if field else "", type_doc(tp)) if d)
    text += "DESCRIPTION:\n" + _indent(wrap(doc or "<empty>", WIDTH), 4) + "\n"
    listed = _field_list(tp, 1, recursive)
    if listed:
        text += "FIELDS:\n" + listed
    return text + "\n"


def _header(cls: type[KubeObject]) -> str:
    group = f"GROUP:      {cls.API_GROUP}\n" if cls.API_GROUP else ""
    return f"{group}KIND:       {cls.KIND}\nVERSION:    {cls.API_VERSION}\n\n"


def _field_list(tp: Any, level: int, recursive: bool, seen: frozenset[type] = frozenset()) -> str:
    """kubectl's FIELDS: name, type (`-required-`), description; with `recursive` the
    names and types of the whole tree instead, without descriptions."""
    struct = _struct(tp)
    if struct is None or struct.cls in seen:
        return ""
    out = []
    pad = "  " * level
    for field in sorted(fields_of(struct), key=lambda f: f.name):
        required = " -required-" if field.required else ""
        out.append(f"{pad}{field.name}\t<{field.type_name}>{required}\n")
        if recursive:
            out.append(_field_list(field.type, level + 1, True, seen | {struct.cls}))
        else:
            text = wrap(_joined(field.doc) or "<no description>", 78 - 2 * level)
            out.append(_indent(text, 2 * level + 2) + "\n\n")
    return "".join(out)


# --- the models' types and docstrings ------------------------------------------------------


def fields_of(tp: Any) -> list[Field]:
    """The documented fields of a model type (lists and maps: of their items)."""
    struct = _struct(tp)
    if struct is None:
        return []
    docs = attribute_docs(struct.cls)
    return [
        Field(
            f.encode_name,
            f.type,
            _joined(docs.get(f.name, "")),
            f.required or (struct.cls.__name__, f.encode_name) in REQUIRED,
            _FREE_FORM.get((struct.cls.__name__, f.encode_name)) or type_name(f.type),
        )
        for f in struct.fields
        if not f.encode_name.startswith("x-")  # kubedra's own bookkeeping, not the API's
    ]


def _struct(tp: Any) -> Any:
    """The model behind an optional, a list or a map's values (None: not a model)."""
    while True:
        if isinstance(tp, mi.UnionType):
            tp = next((t for t in tp.types if not isinstance(t, mi.NoneType)), None)
        elif isinstance(tp, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
            tp = tp.item_type
        elif isinstance(tp, mi.DictType):
            tp = tp.value_type
        else:
            return tp if isinstance(tp, mi.StructType) else None


def type_name(tp: Any) -> str:
    """kubectl's type hint: `string`, `integer`, `[]DeviceRequest`, `map[string]string`,
    `Quantity`, `Object` (free-form)."""
    if isinstance(tp, mi.UnionType):
        inner = [t for t in tp.types if not isinstance(t, mi.NoneType)]
        return type_name(inner[0]) if len(inner) == 1 else "Object"
    if isinstance(tp, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return "[]" + type_name(tp.item_type)
    if isinstance(tp, mi.DictType):
        return "map[string]" + type_name(tp.value_type)
    if isinstance(tp, mi.StructType):
        return _go_name(tp.cls)
    if isinstance(tp, mi.CustomType) and tp.cls is Quantity:
        return "Quantity"
    return _SCALARS.get(type(tp), "Object")


_SCALARS: dict[type, str] = {
    mi.StrType: "string",
    mi.IntType: "integer",
    mi.BoolType: "boolean",
    mi.FloatType: "number",
}
# kubedra's names of upstream types that differ
_GO_NAMES = {"ResourceClaimRef": "ResourceClaim"}


def _go_name(cls: type) -> str:
    return _GO_NAMES.get(cls.__name__, cls.__name__)


def type_doc(tp: Any) -> str:
    """A model type's docstring, joined as OpenAPI joins it ("" for other types)."""
    struct = _struct(tp)
    if struct is None or struct.cls in (Model, KubeObject):
        return ""
    return _joined(inspect.cleandoc(struct.cls.__doc__ or ""))


@functools.cache
def attribute_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under its annotation), this class's and its
    bases', by Python field name."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        node = _class_node(klass)
        if node is not None:
            docs.update(_docs_in(node))
    return docs


def _class_node(klass: type) -> ast.ClassDef | None:
    module = sys.modules.get(klass.__module__)
    if module is None or not klass.__module__.startswith("kubedra."):
        return None
    return _classes(module.__name__).get(klass.__qualname__)


@functools.cache
def _classes(module: str) -> dict[str, ast.ClassDef]:
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (OSError, TypeError):  # no source (a frozen build): no field text
        return {}
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return classes


def _docs_in(node: ast.ClassDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for stmt, nxt in itertools.pairwise(node.body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = nxt.value if isinstance(nxt, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out[stmt.target.id] = inspect.cleandoc(value.value)
    return out


# --- text ----------------------------------------------------------------------------------


def _joined(doc: str) -> str:
    """A doc comment as kube-openapi makes a description of it: the lines of a paragraph
    joined by spaces, indented lines (examples, list continuations) kept on their own."""
    out = ""
    for line in doc.split("\n"):
        line = line.rstrip(" ")
        if not line:
            out = out[:-1] + "\n\n" if out else "\n\n"
        elif line.startswith((" ", "\t")):
            out = out[:-1] + "\n" + line + "\n" if out else "\n" + line + "\n"
        else:
            out += line + " "
    return out.strip()


def wrap(text: str, limit: int) -> str:
    """mitchellh/go-wordwrap's WrapString, as kubectl wraps descriptions: words move to
    the next line past `limit`, existing line breaks and spacing are kept."""
    out: list[str] = []
    current = 0
    word, space = "", ""
    for char in text:
        if char == "\n":
            if not word:
                if current + len(space) <= limit:
                    out.append(space)
            else:
                out.append(space + word)
            out.append("\n")
            current, word, space = 0, "", ""
        elif char.isspace() and char != "\u00a0":
            if not space or word:
                current += len(space) + len(word)
                out.append(space + word)
                word, space = "", ""
            space += char
        else:
            word += char
            if current + len(word) + len(space) > limit and len(word) < limit:
                out.append("\n")
                current, space = 0, ""
    if not word:
        if current + len(space) <= limit:
            out.append(space)
    else:
        out.append(space + word)
    return "".join(out)


def _indent(text: str, spaces: int) -> str:
    """sprig's indent: every line, empty ones too."""
    pad = " " * spaces
    return pad + text.replace("\n", "\n" + pad)
