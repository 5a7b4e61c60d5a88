"""servoloop virtual-bus (placeholder until the virtual bus lands)."""


def register(sub) -> None:
    return None
