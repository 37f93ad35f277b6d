"""The <thinking>/<answer>/<triplets> format and its strict parser (section 3.1, C.1).
"""

from __future__ import annotations

import pytest
from pertreasonqa_lib.answer_parsing import ResponseFormatError, format_response, parse_response


def test_parse_response_strict():
    text = format_response("KD of P lowers A.", "down", [("P", 1, "A"), ("A", 1, "G")])
    assert parse_response(text) == ("KD of P lowers A.", "down", [("P", 1, "A"), ("A", 1, "G")])
    ok = "<thinking>x</thinking>\n<answer> Up </answer><triplets>\n(P, -1, B)\n\n(B, 0, G)\n</triplets>\n"
    assert parse_response(ok)[1:] == ("up", [("P", -1, "B"), ("B", 0, "G")])
    empty = "<thinking>x</thinking><answer>unchanged</answer><triplets></triplets>"
    assert parse_response(empty)[2] == []
    bad = {
        "<answer>up</answer><triplets></triplets>": "exactly one <thinking>",
        "<thinking>a</thinking><answer>up</answer><answer>up</answer><triplets></triplets>": "exactly one <answer>",
        "<thinking>a</thinking><answer>maybe</answer><triplets></triplets>": "answer must be one of",
        "<thinking>a</thinking><answer>up</answer><triplets>P activates G</triplets>": "not a .SOURCE, SIGN, TARGET. triplet",
        "<thinking>a</thinking><answer>up</answer><triplets>(P, +, G)</triplets>": "not a .SOURCE, SIGN, TARGET. triplet",
        "So: <thinking>a</thinking><answer>up</answer><triplets></triplets>": "text outside",
        "<answer>up</answer><thinking>a</thinking><triplets></triplets>": "order",
    }
    for text, message in bad.items():
        with pytest.raises(ResponseFormatError, match=message):
            parse_response(text)
