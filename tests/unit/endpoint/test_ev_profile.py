"""EV profiles (OCP MRC mrc_ctl.h): the field expansion against the specification's own examples, and our SID plan.

The vectors are the output of the specification's examples/ev_expansion/ev_expansion.c (srandom(0)): per
example its EV Format widths, its EV profile fields, and the first EVs with their expansion.
"""

from __future__ import annotations

import pytest

from controller.model.sids import SidPlan, fmt_v6
from controller.model.topology import load
from controller.plan.evs import (EV_MAX_BYTES, EvField as F, ProfileError, carrier_of, expand, generate, host_evs,
                                 pack_values, spine_ev, srv6_profile)
from controller.routes import Fabric, Path
from tests.paths import UNIT_DATA

CASES = {
    'Structured EV Generated w/ Fixed & Weird Mask': ([16, 16], [F(16, 0x1000, 0x1, 0xff, 0xf0f), F(16, 0x2000, 0x1, 0xff, 0xf0f)],
        [('3312', '13032102'),
         ('e33e', '1e03230e'),
         ('b5b5', '1b052b05')]),
    'SRv6 Explicit (subset)': ([32, 16, 16, 16, 16], [F(32, 0xdeaddead, 0x0, 0x0, 0x0), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff)],
        [('e298f115', 'deaddeade298f115'),
         ('e13f3177', 'deaddeade13f3177'),
         ('553f36e5', 'deaddead553f36e5')]),
    'SRv6 Generated': ([32, 16, 16, 16, 16], [F(32, 0x42424242, 0x0, 0x0, 0x0), F(4, 0x0, 0x1, 0xf, 0xf), F(4, 0x0, 0x1, 0xf, 0xf), F(4, 0x0, 0x1, 0xf, 0xf), F(4, 0x0, 0x1, 0xf, 0xf)],
        [('78ba', '4242424200070008000b000a'),
         ('76dc', '4242424200070006000d000c'),
         ('d2a8', '42424242000d0002000a0008')]),
    'SRv6 Generated w/ Fixed': ([32, 16, 16, 16, 16], [F(32, 0x13131313, 0x0, 0x0, 0x0), F(16, 0x100, 0x1, 0xf, 0xf), F(16, 0x200, 0x1, 0xf, 0xf), F(16, 0x300, 0x1, 0xf, 0xf), F(16, 0x400, 0x1, 0xf, 0xf)],
        [('9b79', '131313130109020b03070409'),
         ('26c7', '1313131301020206030c0407'),
         ('f9fe', '13131313010f0209030f040e')]),
    'SRv6+SRH Explicit': ([32, 16, 16, 16, 16, 16, 16, 32, 16, 16], [F(32, 0xcafecafe, 0x0, 0x0, 0x0), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff), F(32, 0xdecafbad, 0x0, 0x0, 0x0), F(16, 0x0, 0x0, 0x0, 0xffff), F(16, 0x0, 0x0, 0x0, 0xffff)],
        [('b8a7310e14c80962ae4b9dd6587a4c16', 'cafecafeb8a7310e14c80962ae4b9dd6decafbad587a4c16'),
         ('c496626fa3b0d56027fa9733c0ca89da', 'cafecafec496626fa3b0d56027fa9733decafbadc0ca89da'),
         ('5796da93bdf5faf412ab716a4bfc273e', 'cafecafe5796da93bdf5faf412ab716adecafbad4bfc273e')]),
}


def raw(h: str) -> bytes:
    return bytes.fromhex(h.ljust(2 * EV_MAX_BYTES, "0"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_expansion_matches_the_specifications_examples(name: str) -> None:
    widths, fields, pairs = CASES[name]
    for ev, expanded in pairs:
        assert expand(raw(ev), fields, widths) == raw(expanded), (name, ev)


def test_generated_mode_gives_every_value_within_min_and_max_first_field_slowest() -> None:
    widths, fields, _ = CASES["SRv6 Generated w/ Fixed"]
    evs = generate(fields, widths)
    assert len(evs) == 15 ** 4  # four fields of 1..0xf
    assert evs[0] == raw("1111") and evs[1] == raw("1112") and evs[15] == raw("1121") and evs[-1] == raw("ffff")
    assert expand(evs[0], fields, widths) == raw("13131313" "0101" "0201" "0301" "0401")
    assert generate(fields, widths, 2) == evs[:2]
    assert pack_values([9, 0xB, 7, 9], fields) == raw("9b79")  # the example's first EV


@pytest.mark.parametrize("fields, widths, message", [
    ([F(16), F(16), F(16)], [16, 16], "3 fields but the format has 2"),
    ([F(17, mask=1)], [16, 16], "field 0: width 17 is not within 1-16"),
    ([F(8, init_val=0x100)], [8], "field 0: init_val 0x100 is wider than 8 bits"),
    ([F(8, mask=0x1FF)], [16], "field 0: mask 0x1ff has bits outside its 8 bits"),
    ([F(8, max_val=16, mask=0xF)], [8], "field 0: max_val 0x10 is wider than its 4 mask bits"),
    ([F(8, min_val=3, max_val=2, mask=0xF)], [8], "field 0: min_val 0x3 is above max_val 0x2"),
])
def test_the_specifications_restrictions_refuse_a_profile(fields: list[F], widths: list[int], message: str) -> None:
    with pytest.raises(ProfileError, match=f"^{message}"):
        expand(raw("00"), fields, widths)


def test_an_ev_with_bits_past_what_the_fields_take_is_refused() -> None:
    widths, fields, _ = CASES["SRv6 Generated"]  # four 4-bit fields: 16 EV bits
    with pytest.raises(ProfileError, match="^the EV has bits set past the 16 its fields take"):
        expand(raw("78ba8"), fields, widths)


def test_our_sid_plan_as_a_profile_gives_each_spines_carrier() -> None:
    sids = SidPlan()
    fields, widths = srv6_profile(sids, 1, 3, 4)
    assert fields[1] == F(16, 0x1000, 1, 4, 0x7)  # plane 1's T1 uN, index 1 + spine from 3 EV bits
    for spine in range(4):
        assert carrier_of(expand(spine_ev(spine, fields), fields, widths)) == fmt_v6(Path(1, 0, spine, 3).carrier(sids))
    assert [carrier_of(expand(e, fields, widths)) for e in generate(fields, widths)] == \
        [f"fcbb:bb00:100{j + 1}:1403:1fff::" for j in range(4)]


def test_the_profile_expands_to_the_carriers_the_export_gives() -> None:
    fabric = Fabric(load(UNIT_DATA / "two_plane_lab.yaml"))
    topo = fabric.topo
    for ev in host_evs(fabric, "h0", ["h2"])["h2"]:
        dst_leaf = next(i for i, t in enumerate(topo.t0s(ev.plane)) if t.name == ev.dst_leaf)
        fields, widths = srv6_profile(fabric.sids, ev.plane, dst_leaf, len(topo.t1s(ev.plane)))
        assert carrier_of(expand(spine_ev(ev.spine, fields), fields, widths)) == ev.carrier
