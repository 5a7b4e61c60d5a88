"""The package's public names all resolve (lazy ones included)."""

from servoloop import core_cy


def test_every_public_name_resolves():
    for name in core_cy.__all__:
        assert getattr(core_cy, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no_such_kernel"):
        core_cy.no_such_kernel  # noqa: B018
