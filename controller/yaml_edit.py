"""Change values in a robot config's YAML text without losing its comments or layout.

PyYAML drops comments on a round trip, and a config is mostly comments a user
wrote; so values are replaced in the text itself, at the positions the YAML
parser reports for their nodes.  Used by ``servoloop zero`` (the ``offset``
of each servo).
"""

from __future__ import annotations

import yaml

__all__ = ["set_servo_fields"]


def _scalar(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def set_servo_fields(text: str, changes: dict[int, dict[str, object]]) -> str:
    """``text`` with ``servos[i].KEY := value`` for each ``{i: {KEY: value}}``.

    An existing scalar is replaced where it stands; a missing key is added to the
    servo's mapping (``{..., key: v}`` for a flow mapping, a new line for a block one).

    Raises
    ------
    ValueError
        The text has no ``servos`` list or no item ``i``.
    """
    root = yaml.compose(text)
    servos = None
    if isinstance(root, yaml.MappingNode):
        servos = next((v for k, v in root.value if getattr(k, "value", None) == "servos"), None)
    if not isinstance(servos, yaml.SequenceNode):
        raise ValueError("the config has no 'servos' list")
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in text indices
    for i, fields in changes.items():
        if i >= len(servos.value) or not isinstance(servos.value[i], yaml.MappingNode):
            raise ValueError(f"the config has no servos[{i}] mapping")
        node = servos.value[i]
        for key, value in fields.items():
            hit = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if hit is not None:
                edits.append((hit.start_mark.index, hit.end_mark.index, _scalar(value)))
            elif node.flow_style:
                end = text.rindex("}", node.start_mark.index, node.end_mark.index)
                edits.append((end, end, f", {key}: {_scalar(value)}"))
            else:
                # a new line under the first key (after its line's comment, if any)
                first_key = node.value[0][0]
                eol = text.find("\n", first_key.start_mark.index)
                eol = len(text) if eol < 0 else eol
                edits.append((eol, eol, "\n" + " " * first_key.start_mark.column + f"{key}: {_scalar(value)}"))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
