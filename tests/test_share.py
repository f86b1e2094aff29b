"""One request's share of the queue over all its routes (app/share.py): no torch, no HTTP."""

from __future__ import annotations

import asyncio

from app.share import RequestShare

DIRECT, PIVOT = ["en-fr"], ["de-en", "en-fr"]


def claims(share: RequestShare, *legs: tuple[int, int, int, int]) -> list[str | None]:
    """What each (route, leg, sentences, pieces) claim said, made side by side in that order."""

    async def run():
        return await asyncio.gather(*(share.claim(*leg) for leg in legs))

    return asyncio.run(run())


def test_the_first_legs_of_all_routes_are_counted_together():
    """Each route alone is within the share; together they are not, and every route hears
    it (none queues before all are counted)."""
    over = claims(RequestShare(4, [DIRECT, PIVOT], "en"), (0, 0, 3, 3), (1, 0, 2, 3))
    assert over[0] == over[1]
    assert over[0] == (
        "`q` holds 5 sentences whose texts go to 2 models side by side, by their language "
        "(en-fr: 3, de-en+en-fr: 3 pieces): 6 pieces in all (a sentence too long for the "
        "model is cut, and the words between URLs or e-mail addresses are translated apart; "
        "a piece repeated is counted once); the server takes at most 4 pieces from one "
        "request, over all its models (send the texts in several requests)"
    )
    assert claims(RequestShare(4, [DIRECT, PIVOT], "en"), (0, 0, 2, 2), (1, 0, 2, 2)) == [None] * 2


def test_a_request_of_one_route_is_told_its_sentences():
    share = RequestShare(2, [DIRECT])
    assert claims(share, (0, 0, 3, 3)) == [
        "`q` holds 3 sentences; the server takes at most 2 from one request (send them in "
        "several requests)"
    ]


def test_a_second_leg_counts_in_place_of_the_first_where_it_is_larger():
    """Through the pivot language the second leg's pieces are known once the first is
    translated: they count beside the other routes' (2 here), the first leg's no more."""
    share = RequestShare(5, [DIRECT, PIVOT], "en")
    assert claims(share, (0, 0, 2, 2), (1, 0, 3, 3)) == [None, None]
    assert claims(share, (1, 1, 2, 2)) == [None]  # fewer: the first leg's 3 still count
    assert claims(share, (1, 1, 3, 3)) == [None]
    assert claims(share, (1, 1, 4, 4)) == [
        "`q`, translated into 'en' by de-en on the way to en-fr, is 4 pieces to translate "
        "again, beside 2 for its other texts; the server takes at most 5 pieces from one "
        "request (send the text in several requests)"
    ]


def test_whether_a_request_is_over_does_not_depend_on_the_order_its_legs_end_in():
    """Two routes through the pivot language: each route counts its larger leg, so the
    request is over its share whichever second leg is counted first."""
    for order in ((0, 1), (1, 0)):
        share = RequestShare(7, [["de-en", "en-fr"], ["es-en", "en-fr"]], "en")
        assert claims(share, (0, 0, 3, 3), (1, 0, 3, 3)) == [None, None]
        said = [claims(share, (route, 1, 4, 4))[0] for route in order]
        assert said[0] is None and said[1] is not None and "beside 4" in said[1]
