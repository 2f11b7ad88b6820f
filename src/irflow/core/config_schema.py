"""The config schema read for the user: its errors as what to write, and command-line values.

jsonschema says what is wrong ("'source' is a required property", "is not valid under any of
the given schemas"); these messages also say what is right: the missing key's accepted forms
with an example, an enumeration's or a oneOf's allowed values with the closest one to what was
written. Snakemake passes ``--config offline=true`` as the text "true"; ``read_text_values``
reads such text as YAML where the schema takes no text.
"""

from __future__ import annotations

import copy
import difflib

import jsonschema
import yaml


def resolve(schema: dict, root: dict) -> dict:
    if "$ref" in schema:
        return root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _valid(instance, schema: dict, root: dict) -> bool:
    return jsonschema.Draft202012Validator(schema | {"$defs": root["$defs"]}).is_valid(instance)


# --- command-line values ----------------------------------------------------------------------

_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (type(None), "null"))


def _json_type_fits(value, types: list[str]) -> bool:
    for python_type, name in _JSON_TYPES:  # bool first: a bool is an int too
        if isinstance(value, python_type):
            return name in types or (name == "integer" and "number" in types)
    return False


def read_text_values(instance, schema: dict, root: dict):
    """``instance`` with each string the schema takes no string for read as YAML, when that
    gives a value of the type wanted ("true" for a boolean, "3" for an integer, "null")."""
    schema = resolve(schema, root)
    if isinstance(instance, str):
        types = schema.get("type", [])
        types = [types] if isinstance(types, str) else types
        if not types or "string" in types:
            return instance
        try:
            value = yaml.safe_load(instance)
        except yaml.YAMLError:
            return instance
        return value if _json_type_fits(value, types) else instance
    if isinstance(instance, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, value in instance.items():
            subschema = properties.get(key, extra if isinstance(extra, dict) else None)
            if subschema is not None:
                instance[key] = read_text_values(value, subschema, root)
    if isinstance(instance, list) and isinstance(schema.get("items"), dict):
        instance[:] = [read_text_values(item, schema["items"], root) for item in instance]
    for alternative in schema.get("oneOf", []) + schema.get("anyOf", []):
        read = read_text_values(copy.deepcopy(instance), alternative, root)
        if _valid(read, resolve(alternative, root), root):
            return read
    return instance


# --- errors -----------------------------------------------------------------------------------


def _key_path(error: jsonschema.ValidationError, *more) -> str:
    return ".".join(str(part) for part in [*error.absolute_path, *more]) or "<top level>"


def _flow(value) -> str:
    """A value as the user writes it in the YAML config, on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000)
    return text.removesuffix("...\n").strip()  # a plain scalar's end-of-document marker


def _did_you_mean(written, allowed: list) -> str:
    """The hint "; did you mean 'bm25'?" for the allowed value nearest ``written``."""
    by_lower = {str(value).lower(): value for value in allowed}
    close = difflib.get_close_matches(str(written).lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def _not_allowed(path: str, written, allowed: list) -> str:
    listed = ", ".join(repr(value) for value in allowed)
    return (
        f"config key '{path}': {written!r} is not allowed; allowed values: {listed}"
        + _did_you_mean(written, allowed)
    )


def _form(schema: dict, root: dict) -> str:
    """One accepted form of a value: the schema's example, or its shape."""
    schema = resolve(schema, root)
    if schema.get("examples"):
        return _flow(schema["examples"][0])
    if "const" in schema:
        return _flow(schema["const"])
    if "enum" in schema:
        return " or ".join(_flow(value) for value in schema["enum"])
    if schema.get("type", "object") == "object" and schema.get("required"):
        properties = schema.get("properties", {})
        shown = [
            f"{key}: {_form(properties[key], root) if key in properties else '...'}"
            for key in schema["required"]
        ]
        return "{" + ", ".join(shown) + "}"
    types = schema.get("type", "value")
    return "<" + (" or ".join(types) if isinstance(types, list) else types) + ">"


def _forms(schema: dict, root: dict) -> str:
    """The accepted forms of a value, as alternatives."""
    schema = resolve(schema, root)
    alternatives = schema.get("oneOf") or schema.get("anyOf") or [schema]
    return " or ".join(_form(alternative, root) for alternative in alternatives)


def _missing(error: jsonschema.ValidationError, root: dict) -> str:
    missing = [key for key in error.validator_value if key not in error.instance]
    key = next(key for key in missing if error.message.startswith(repr(key)))
    message = f"config key '{_key_path(error, key)}' is missing"
    schema = error.schema.get("properties", {}).get(key)
    if schema is None:
        return message
    schema = resolve(schema, root)
    description = " ".join(schema.get("description", "").split()).rstrip(".")
    return f"{message}; write {_forms(schema, root)}" + (f" ({description})" if description else "")


def _unexpected(error: jsonschema.ValidationError) -> str:
    known = sorted(error.schema.get("properties", {}))
    unexpected = [key for key in error.instance if key not in known]
    hints = "".join(_did_you_mean(key, known) for key in unexpected)
    listed = f"; known keys: {', '.join(known)}" if known else ""
    return f"config key '{_key_path(error)}': {error.message}{hints}{listed}"


def _meant(branches: dict[int, list]) -> int | None:
    """The alternative of a oneOf the user meant: the one whose discriminating values (a
    ``const`` such as ``type: dense``, the instance's own type) fit, or among those the one
    with every required key; None when that is not a single one."""
    fitting = [
        branch
        for branch, errors in branches.items()
        if not any(
            error.validator == "const" or (error.validator == "type" and not error.path)
            for error in errors
        )
    ]
    complete = [
        branch
        for branch in fitting
        if not any(error.validator == "required" for error in branches[branch])
    ]
    for candidates in (fitting, complete):
        if len(candidates) == 1:
            return candidates[0]
    return None


def _shared_choice(error: jsonschema.ValidationError, branches: dict[int, list]) -> str | None:
    """When every alternative fails one ``const`` or ``enum`` of the same key (``type`` of a
    retriever), that key's message with the values of all of them."""
    failures = []
    for errors in branches.values():
        failed = [sub for sub in errors if sub.validator in ("const", "enum")]
        if len(failed) != 1:
            return None
        failures += failed
    keys = {tuple(failed.path) for failed in failures}
    if len(keys) != 1 or len(branches) != len(error.validator_value):
        return None
    allowed = []
    for failed in failures:
        values = [failed.validator_value] if failed.validator == "const" else failed.validator_value
        allowed += [value for value in values if value not in allowed]
    return _not_allowed(_key_path(error, *failures[0].path), failures[0].instance, allowed)


def describe(error: jsonschema.ValidationError, root: dict) -> list[str]:
    """One line per problem, each naming the key and what may be written there. For a oneOf,
    the problems of the alternative the user meant, else the forms it accepts."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[int, list] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        meant = _meant(branches)
        if meant is not None:
            return [line for sub in branches[meant] for line in describe(sub, root)]
        shared = _shared_choice(error, branches)
        if shared is not None:
            return [shared]
        return [
            f"config key '{_key_path(error)}': {_flow(error.instance)} is none of the accepted "
            f"forms: {_forms(error.schema, root)}"
        ]
    if error.validator == "required":
        return [_missing(error, root)]
    if error.validator == "enum":
        return [_not_allowed(_key_path(error), error.instance, error.validator_value)]
    if error.validator == "const":
        return [_not_allowed(_key_path(error), error.instance, [error.validator_value])]
    if error.validator == "additionalProperties":
        return [_unexpected(error)]
    return [f"config key '{_key_path(error)}': {error.message}"]
