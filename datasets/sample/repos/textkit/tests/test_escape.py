from textkit.escape import escape_html, unescape_html


def test_escape_ampersand():
    assert escape_html("fish & chips") == "fish &amp; chips"


def test_escape_quotes():
    assert escape_html("say \"hi\" 'now'") == "say &quot;hi&quot; &#x27;now&#x27;"


def test_unescape_round_trip_plain_text():
    text = "Tom & Jerry's \"show\""
    assert unescape_html(escape_html(text)) == text
