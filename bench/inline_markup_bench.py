"""How well a paragraph with inline markup is translated: text quality and where the tags go.

    python -m bench.inline_markup_bench --weights weights/en-de --source ../shared/data/tatoeba/dev.en

Takes `--sentences` sentences of four words or more from `--source` (seeded), wraps one or two
words or short phrases of each in `<b>` or `<a href>` (seeded), and translates each paragraph
through the HTML format (app.html_format.translate_html) with the real model at the service's
default beam (4). Then it measures:

- text: chrF and BLEU (sacrebleu) of the output with its tags removed against the translation
  of the same sentence without markup by the same model (the best the markup path can do), and
  how many come out identical to it;
- tags: the share of paragraphs whose every tag comes back exactly once, properly nested, and
  the share of pairs that wrap at least one word;
- placement (a proxy): each wrapped stretch of the translation is translated back alone with
  the reverse model (`--back`, a model the markup path never uses) and compared by chrF with the
  source words it wraps, next to the same score for a stretch of as many words taken at random
  from the same translation (what placement by chance gives).

Also: how many texts were sent to the model per paragraph. CPU only, one thread: quality, not
speed, is measured here.

`--attention`: the same placement score for another way to place the pairs, not used by the
service: the model's own cross-attention (a forced pass of the plain sentence and its
translation, the heads of one decoder layer averaged; each target word goes with the source
word its pieces attend to most, and a pair wraps the target words from the first to the last
that go with its source words), for each decoder layer.

`--atoms`: instead, markup that stays as written (an atom) inside the sentence. In each
sentence, one of a few URLs (`URLS`) or an inline `<code>word</code>` (`CODES`) is inserted at
a random word boundary (seeded), in three forms: an HTML paragraph with the `<code>`, one with
the URL, and the URL in plain text (a unit built as the service's /translate builds one for a
sentence with an address). Each is translated as the service does; then: chrF of the output
without the atom against the translation of the sentence without it, how many are identical
to that, how many give the atom back exactly once, and in how many the sentence went to the
model whole with a name standing in for the atom (app/formats/inline.py, STAND_INS) and came
back with it. `--no-stand-in`: the same with the atoms cutting the sentence (what the
service did before).
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.inline_markup_bench"))

import argparse
import html
import random
import re
import statistics
import subprocess
import sys
import time
from html.parser import HTMLParser

import sacrebleu
import torch

from app.formats import inline
from app.formats.inline import UnitBuilder, translate_units
from app.html_format import translate_html
from model_core.masks import target_mask
from model_core.model import MultiHeadAttention
from model_core.translator import Translator

_WORD = re.compile(r"[A-Za-zÀ-ÿ0-9'’-]+")


def wrap(sentence: str, rng: random.Random, link: int) -> tuple[str, list[str]] | None:
    """The sentence as an HTML paragraph with one or two stretches of words in <b> or <a>, and
    those stretches; None when it has too few words."""
    words = list(_WORD.finditer(sentence))
    if len(words) < 4:
        return None
    spans: list[tuple[int, int]] = []
    for _ in range(rng.choice((1, 1, 2))):
        n = rng.choice((1, 1, 2, 3))
        i = rng.randrange(0, len(words) - n + 1)
        if any(i <= b and a <= i + n - 1 for a, b in spans):
            continue
        spans.append((i, i + n - 1))
    spans.sort()
    out, at, wrapped = [], 0, []
    for a, b in spans:
        start, end = words[a].start(), words[b].end()
        out.append(html.escape(sentence[at:start], quote=False))
        a = rng.random() < 0.5
        tag = (
            ("a", f'<a href="https://example.com/{link}">') if a else ("b", f'<b class="w{link}">')
        )
        link += 1
        out.append(f"{tag[1]}{html.escape(sentence[start:end], quote=False)}</{tag[0]}>")
        wrapped.append((tag[1], sentence[start:end]))
        at = end
    out.append(html.escape(sentence[at:], quote=False))
    return "<p>" + "".join(out) + "</p>", wrapped


class Pairs(HTMLParser):
    """The tags of a translated paragraph, the text without them, and the text each pair wraps."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text = ""
        self.open: list[tuple[str, int]] = []
        self.wrapped: dict[str, str] = {}  # opening tag -> the text it wraps
        self.nested = True
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(self.get_starttag_text())
        if tag != "p":
            self.open.append((tag, len(self.text), self.get_starttag_text()))

    def handle_endtag(self, tag):
        self.tags.append(f"</{tag}>")
        if tag == "p":
            return
        if not self.open or self.open[-1][0] != tag:
            self.nested = False
            return
        _, at, start = self.open.pop()
        self.wrapped[start] = self.text[at:]

    def handle_data(self, data):
        self.text += data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", default="weights/en-de")
    ap.add_argument("--back", default="weights/de-en", help="the reverse model, for placement")
    ap.add_argument("--source", default="../shared/data/tatoeba/dev.en")
    ap.add_argument("--sentences", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=0, help="print this many examples")
    ap.add_argument("--attention", action="store_true", help="also place by cross-attention")
    ap.add_argument("--atoms", action="store_true", help="measure atoms instead (see above)")
    ap.add_argument("--no-stand-in", action="store_true", help="--atoms: cut at atoms")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.atoms:
        atoms(args)
        return
    rng = random.Random(args.seed)
    with open(args.source, encoding="utf-8") as f:
        lines = [s.strip() for s in f if s.strip()]
    rng.shuffle(lines)
    cases = []
    for line in lines:
        if (w := wrap(line, rng, len(cases) * 2)) is not None:
            cases.append((line, *w))
        if len(cases) == args.sentences:
            break
    model, back = (
        Translator.load(args.weights, device="cpu"),
        Translator.load(args.back, device="cpu"),
    )

    def translate(t: Translator, texts: list[str]) -> list[str]:
        return [r.text for r in t.translate_batch(texts, beam_size=4)]

    sent = [0]

    def counted(texts: list[str]) -> list[str]:
        sent[0] += len(texts)
        return translate(model, texts)

    plain = translate(model, [line for line, _, _ in cases])
    start = time.perf_counter()
    outputs = [translate_html(doc, counted) for _, doc, _ in cases]
    seconds = time.perf_counter() - start
    parsed = [Pairs(o) for o in outputs]
    texts = [" ".join(p.text.split()) for p in parsed]
    chrf = sacrebleu.corpus_chrf(texts, [plain]).score
    bleu = sacrebleu.corpus_bleu(texts, [plain]).score
    same = sum(t == p for t, p in zip(texts, plain, strict=True))
    kept = sum(
        sorted(Pairs(doc).tags) == sorted(p.tags) and p.nested
        for (_, doc, _), p in zip(cases, parsed, strict=True)
    )
    pairs = [
        (src, tgt, " ".join(p.text.split()))
        for (_, _, wrapped), p in zip(cases, parsed, strict=True)
        for tag, src in wrapped
        if p.nested and tag in p.wrapped
        for tgt in [p.wrapped[tag]]
    ]
    nonempty = sum(bool(tgt.strip()) for _, tgt, _ in pairs)
    spans = [tgt.strip() for _, tgt, _ in pairs]
    chance = []
    for _, tgt, text in pairs:
        words = text.split()
        n = max(1, min(len(tgt.split()), len(words)))
        i = rng.randrange(0, len(words) - n + 1) if words else 0
        chance.append(" ".join(words[i : i + n]))
    backs = translate(back, [s or "-" for s in spans + chance])
    score = [
        sacrebleu.sentence_chrf(b, [src]).score
        for b, (src, _, _) in zip(backs, pairs * 2, strict=True)
    ]
    placed, rand = score[: len(pairs)], score[len(pairs) :]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"commit {commit}, {len(cases)} paragraphs, {len(pairs)} pairs, seed {args.seed}")
    print(f"texts sent per paragraph: {sent[0] / len(cases):.2f}; {seconds:.1f} s in all")
    print(f"text vs the plain translation: chrF {chrf:.1f}  BLEU {bleu:.1f}  identical {same}")
    print(f"paragraphs with every tag back, nested: {kept}/{len(cases)}")
    print(f"pairs wrapping words: {nonempty}/{len(pairs)}")
    print(
        f"placement (back-translated wrapped words vs source words, chrF): mean "
        f"{statistics.mean(placed):.1f}, >= 50: {sum(s >= 50 for s in placed)}/{len(placed)}; "
        f"random stretch: mean {statistics.mean(rand):.1f}, >= 50: "
        f"{sum(s >= 50 for s in rand)}/{len(rand)}"
    )
    if args.attention:
        for layer in range(len(model.model.decoder_layers)):
            start = time.perf_counter()
            spans = [attention_spans(model, line, wrapped, layer) for line, _, wrapped in cases]
            seconds = time.perf_counter() - start
            flat = [(src, tgt) for w, sp in zip(cases, spans, strict=True) for src, tgt in sp]
            backs = translate(back, [tgt or "-" for _, tgt in flat])
            score = [
                sacrebleu.sentence_chrf(b, [src]).score
                for b, (src, _) in zip(backs, flat, strict=True)
            ]
            print(
                f"attention, decoder layer {layer}: {len(flat)} pairs, wrapping words "
                f"{sum(bool(t) for _, t in flat)}; placement mean {statistics.mean(score):.1f}, "
                f">= 50: {sum(x >= 50 for x in score)}/{len(score)}; "
                f"{seconds:.1f} s (translation included)"
            )
    for (_, doc, _), plain_k, out in list(zip(cases, plain, outputs, strict=True))[: args.show]:
        print(f"\n  {doc}\n  plain: {plain_k}\n  out:   {out}")
    sys.stdout.flush()


URLS = ["https://example.com/docs", "www.python.org", "http://10.0.0.1:8080/status"]
CODES = ["make", "config.yaml", "git pull", "ls -l"]


def atoms(args: argparse.Namespace) -> None:
    if args.no_stand_in:
        inline.STAND_INS = ()
    rng = random.Random(args.seed)
    with open(args.source, encoding="utf-8") as f:
        lines = [s.strip() for s in f if len(s.split()) >= 4]
    rng.shuffle(lines)
    cases = []  # (sentence, HTML with <code>, HTML with a URL, text with a URL, code, URL)
    for line in lines[: args.sentences]:
        words = list(re.finditer(r"\S+", line))
        at = words[rng.randrange(1, len(words))].start()  # before a word, never the first
        code, url = rng.choice(CODES), rng.choice(URLS)
        before, after = html.escape(line[:at], quote=False), html.escape(line[at:], quote=False)
        cases.append(
            (
                line,
                f"<p>{before}<code>{code}</code> {after}</p>",
                f"<p>{before}{url} {after}</p>",
                f"{line[:at]}{url} {line[at:]}",
                code,
                url,
            )
        )
    model = Translator.load(args.weights, device="cpu")

    def translate(texts: list[str]) -> list[str]:
        return [r.text for r in model.translate_batch(texts, beam_size=4)]

    plain = translate([c[0] for c in cases])
    whole = [0]
    parse = inline.Unit._parse_stand_ins

    def counted(self, translations):
        tokens = parse(self, translations)
        whole[0] += tokens is not None
        return tokens

    inline.Unit._parse_stand_ins = counted
    results = {}
    for name, k in (("HTML <code>", 1), ("HTML URL", 2), ("text URL", 3)):
        whole[0] = 0
        start = time.perf_counter()
        outs = []
        for case in cases:
            if k < 3:
                outs.append(Pairs(translate_html(case[k], translate)).text)
            else:
                b = UnitBuilder()
                b.text(case[k])
                unit = b.build(whole=False)
                outs.append("".join(t.text for t in translate_units([unit], translate)[0]))
        seconds = time.perf_counter() - start
        atom = [c[4] if k == 1 else c[5] for c in cases]
        once = sum(o.count(a) == 1 for o, a in zip(outs, atom, strict=True))
        texts = [" ".join(o.replace(a, " ").split()) for o, a in zip(outs, atom, strict=True)]
        texts = [re.sub(r" ([.,!?])", r"\1", t) for t in texts]
        chrf = sacrebleu.corpus_chrf(texts, [plain]).score
        same = sum(t == p for t, p in zip(texts, plain, strict=True))
        results[name] = (chrf, same, once, whole[0], seconds)
        for case, o in list(zip(cases, outs, strict=True))[: args.show]:
            print(f"  {case[k]}\n    {o}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"commit {commit}, {len(cases)} sentences, seed {args.seed}, "
        f"{'cut at atoms' if args.no_stand_in else 'stand-ins'}"
    )
    for name, (chrf, same, once, used, seconds) in results.items():
        print(
            f"{name}: chrF {chrf:.1f} vs the plain translation, identical {same}, atom back once "
            f"{once}/{len(cases)}, whole with a stand-in {used}; {seconds:.1f} s"
        )


def attention_spans(
    t: Translator, line: str, wrapped: list[tuple[str, str]], layer: int
) -> list[tuple[str, str]]:
    """(source words, the target words cross-attention puts them on) for each wrapped stretch."""
    ids = t.encode_source(line)
    out = t.translate_ids([ids], beam_size=4)[0][0].tokens
    src, mask = t.batch_tensors([ids])
    cfg = t.config
    tgt = torch.tensor(
        [[cfg.bos_id] + out[:-1] if out and out[-1] == cfg.eos_id else [cfg.bos_id] + out]
    )
    kept: list[torch.Tensor] = []
    attn = t.model.decoder_layers[layer].cross_attn

    def attend(q, k, v, m, self=attn, original=MultiHeadAttention.attend):
        w = (q @ k.transpose(-1, -2)) / self.head_dim**0.5  # (B, h, T, S)
        kept.append(torch.softmax(w.masked_fill(~m, float("-inf")), -1).mean(1)[0])  # (T, S)
        return original(self, q, k, v, m)

    attn.attend = attend
    try:
        with torch.no_grad():
            memory = t.model.encode(src, mask)
            t.model.decode(memory, mask, tgt, target_mask(tgt, cfg.pad_id))
    finally:
        del attn.attend
    weights = kept[0][:, : len(ids)]  # (T, S) without EOS
    pieces_src = t.source_tokenizer.id_to_piece(ids)
    word_of_src = list(_words(pieces_src))
    tgt_ids = [i for i in out if i != cfg.eos_id]
    pieces_tgt = t.target_tokenizer.id_to_piece(tgt_ids)
    word_of_tgt = list(_words(pieces_tgt))
    text = t.target_tokenizer.decode(tgt_ids).split()
    if not text or word_of_tgt[-1] + 1 != len(text):
        return [(w, "") for _, w in wrapped]
    aligned: dict[int, set[int]] = {}
    for k, row in enumerate(weights[: len(tgt_ids)]):
        aligned.setdefault(word_of_tgt[k], set()).add(word_of_src[int(row.argmax())])
    result = []
    for _, words in wrapped:
        at = line.find(words)
        first = len(line[:at].split())
        inside = set(range(first, first + len(words.split())))
        hits = [w for w, srcs in aligned.items() if srcs & inside]
        result.append((words, " ".join(text[min(hits) : max(hits) + 1]) if hits else ""))
    return result


def _words(pieces: list[str]):
    """The word number of each sentencepiece piece (a piece starting with ▁ starts a word)."""
    n = -1
    for k, p in enumerate(pieces):
        n += p.startswith("\u2581") or k == 0
        yield n
