"""servoloop scan (placeholder until the bus lands)."""


def register(sub) -> None:
    return None
