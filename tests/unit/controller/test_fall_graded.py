"""A fall in the same tick as another fault: which decides (controller/fall.py ``graded``).

The closed-loop cases (a knocked-over quadruped with a joint-limit, late-tick or comm fault
in the very tick its fall is seen) are in tests/hil/test_fall_reaction.py; here every kind,
both orders, and three faults in one tick.
"""

import pytest

from servoloop.controller.fall import DAMPED_WITH, graded
from servoloop.controller.faults import Fault, FaultKind

FALL = Fault(FaultKind.FALL, "the robot fell")


def _of(kind):
    return Fault(kind, f"a {kind.value} fault", 3, "lf_knee")


@pytest.mark.parametrize("kind", [k for k in FaultKind if k != FaultKind.FALL])
@pytest.mark.parametrize("fall_first", [True, False])
def test_the_worse_of_a_fall_and_another_fault_decides_and_keeps_the_other(kind, fall_first):
    other = _of(kind)
    got = graded(FALL, other) if fall_first else graded(other, FALL)
    decides, rides = (FALL, other) if kind in DAMPED_WITH else (other, FALL)
    assert (got.kind, got.message) == (decides.kind, decides.message)
    assert got.also == (rides,)


def test_the_fall_decides_over_a_limit_and_a_late_tick_but_not_over_comm():
    assert graded(_of(FaultKind.LATE), FALL).kind == FaultKind.FALL
    assert graded(FALL, _of(FaultKind.LIMIT)).kind == FaultKind.FALL
    assert graded(FALL, _of(FaultKind.COMM)).kind == FaultKind.COMM


def test_three_faults_in_one_tick_are_all_kept_flat():
    # late (start of the tick), fall, then the bus: comm decides, the other two recorded
    got = graded(graded(_of(FaultKind.LATE), FALL), _of(FaultKind.COMM))
    assert got.kind == FaultKind.COMM
    assert [f.kind for f in got.also] == [FaultKind.FALL, FaultKind.LATE]
    assert all(f.also == () for f in got.also)


def test_without_a_fall_the_first_found_decides_as_before():
    late, comm = _of(FaultKind.LATE), _of(FaultKind.COMM)
    assert graded(late, comm) is late and graded(None, comm) is comm and graded(late, None) is late
    assert graded(None, None) is None
