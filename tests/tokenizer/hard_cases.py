#!/usr/bin/env python3
"""Prints the hard cases tokenizers are checked on (tests/tokenizer/make_reference.sh): many
scripts, emoji sequences with joiners and modifiers, CRLF and lone CRs, runs of spaces, tabs and
newlines, digits in runs of every length, control characters, contractions in every case, text
that spells special tokens, combining marks. Deterministic: the same bytes every run."""
import sys

lines = [
    "English, Français, Español: naïve café — résumé; Ærø. Straße ß ẞ.",
    "Русский текст: Съешь же ещё этих мягких французских булок.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "中文：我能吞下玻璃而不伤身体。日本語：私はガラスを食べられます。한국어: 나는 유리를 먹을 수 있어요.",
    "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني. עברית: אני יכול לאכול זכוכית.",
    "हिन्दी: मैं काँच खा सकता हूँ। தமிழ்: நான் கண்ணாடி சாப்பிடுவேன். ไทย: ฉันกินกระจกได้",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷🇯🇵 1️⃣ 🧑🏿‍🚀 🤦‍♀️",
    "Combining: e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 Z\u0351\u036b\u0343\u036a\u0302\u036b",
    "Digits: 0 12 345 6789 1234567890 3.14159 1,000,000 2026-11-28 0x1F",
    "Contractions: I'm you're he's she'll we'd they've IT'S I'M YOU'RE We'Ll tHeY'Ve don't DON'T",
    "Specials as text: <|endoftext|> <|fim_prefix|><|endofprompt|> <|begin_of_text|>",
    "CRLF line\r\nnext\rlone CR\n\n\nthree newlines",
    "spaces:     five,\t\ttabs,\t \t mixed, trailing   ",
    "   leading spaces and a very long run:" + " " * 40 + "end",
    "controls: \x01\x02\x07\x1b[31mred\x1b[0m \x7f \x0c form feed \x0b vtab",
    "punctuation!!! ??? ... --- ___ *** /// \\\\ ||| ((())) [[]] {{}} <<>> @#$%^&*",
    "code: def f(x):\n    return x ** 2  # comment\n\tif (a && b) { c->d(); }",
    "URLs: https://example.com/a/b?c=d&e=f#g user@example.org",
    "mixed scripts in a word: abcабвαβγ123def",
    "quotes: \u2018single\u2019 \u201cdouble\u201d \u00abguillemets\u00bb",
    "\u00a0non-breaking\u00a0spaces\u2003em\u2009thin",
]
sys.stdout.write("\n".join(lines * 3) + "\n")
