"""How the rule for a text in a language no model serves (app/detect.py, `Detector.unserved`)
does at a few values of UNSERVED_MASS, over English and German text and over other languages.

    nice -n 19 python -m bench.detect_eval [--mass 1e-3 2e-3 3e-3 5e-3] [--data ../shared/data]

No network, no model of ours: py3langid's shipped model alone, as the service loads it, with
the detector of the shipped models' languages (en, de).

- The corpora: every non-blank line of tatoeba/*.{en,de} and multi30k/*.{en,de} under
  `--data`, each alone, and as paragraphs: each file's lines taken in order, 2, 3, 4, 2, 3, 4,
  ... at a time, joined by a space (a request is often a paragraph). For each value of
  UNSERVED_MASS, how many the rule refuses, and which; also the lines that give English and
  German together the least mass (`--lowest`), refused or not, with the full model's best
  language: the room the rule has.
- English and German sentences with foreign names, words and quotes written below (`BORROWED`),
  which the corpora have few of: which ones the rule refuses at each value.
- Sentences of other languages written below (`FOREIGN`: everyday short sentences, 3 to 12
  words), and how many of each language the rule refuses at each value; those it lets through
  are listed with their mass and best language.

The rule's other parts (NAMED_CONFIDENCE, SERVED_PART) stay as app/detect.py has them. The
corpora took 40 s on the 2-core development machine (2026-11-27; the full model ranks a short
line in about 40 us).
"""

from __future__ import annotations

if __name__ == "__main__":
    # run through bench.launch, which imports this module itself: a Ctrl-C, even while
    # torch imports, is one line (status 130), and what the benchmark started is stopped
    from bench.launch import main_of

    raise SystemExit(main_of("bench.detect_eval"))

import argparse
import heapq
from collections.abc import Iterator
from pathlib import Path

from app import detect
from app.detect import Detector, full_identifier, readable

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
SERVED = ("en", "de")
CORPORA = [
    f"{corpus}/{split}.{lang}"
    for corpus, splits in (
        ("tatoeba", ("train", "dev")),
        ("multi30k", ("train", "val", "test2016")),
    )
    for split in splits
    for lang in SERVED
]

BORROWED = [
    "I met François Hollande in Paris.",
    "Mein Name ist Jan Kowalski.",
    "Frau Yılmaz wohnt in Köln.",
    "Der Film heißt «Le fabuleux destin d'Amélie Poulain».",
    "We ate paella in Barcelona.",
    "Bon appétit!",
    "São Paulo",
    "Déjà vu",
    "Hasta la vista, baby.",
    "Que sera, sera.",
    "La dolce vita",
    "Ciao bella!",
    "Pizza Margherita, bitte.",
    "Das ist ein Déjà-vu.",
    "El Niño kommt.",
    "Il Postino is a film.",
    "Coq au vin and crème brûlée.",
    "We stayed at the Hôtel de la Paix in Genève.",
    "Wir wohnen in der Rue de la Gare.",
    "The menu had tapas, chorizo and sangría.",
    "Er bestellte einen Cappuccino und ein Tiramisù.",
    "Our guide, José Luis Rodríguez, met us at the airport.",
    "Tom adores me.",
]

FOREIGN: dict[str, list[str]] = {
    "fr": [
        "Nous aimons le pain et le fromage du village.",
        "Je voudrais réserver une table pour deux personnes ce soir.",
        "Où est la gare, s'il vous plaît ?",
        "Il fait très beau aujourd'hui.",
        "Nous allons au marché samedi matin.",
        "Pouvez-vous m'aider avec mes bagages ?",
        "Le train part à huit heures.",
        "J'ai perdu mes clés hier soir.",
        "Ma sœur habite à Lyon depuis trois ans.",
        "Combien coûte ce billet ?",
        "Les enfants jouent dans le jardin.",
        "Je ne comprends pas cette question.",
        "Il faut acheter du lait et des œufs.",
        "Nous avons visité le musée avec nos amis.",
        "Le chat dort sur le canapé.",
        "Merci pour votre aide, à demain !",
        "La réunion commence dans dix minutes.",
        "Tu veux un café ou un thé ?",
    ],
    "es": [
        "¿Dónde está la estación de tren?",
        "Me gustaría reservar una mesa para dos personas.",
        "Hoy hace mucho calor en la ciudad.",
        "Mi hermano trabaja en un hospital.",
        "¿Cuánto cuesta este libro?",
        "Vamos a la playa el domingo.",
        "No entiendo lo que dices.",
        "Los niños están jugando en el parque.",
        "Necesito comprar pan y leche.",
        "Mañana tengo una reunión muy importante.",
        "¿Puedes ayudarme con las maletas?",
        "El tren sale a las ocho de la mañana.",
        "Perdí mis llaves ayer por la noche.",
        "Mi madre cocina muy bien.",
        "Gracias por tu ayuda, hasta mañana.",
        "Te acabo de enviar un correo electrónico.",
    ],
    "it": [
        "Dov'è la stazione, per favore?",
        "Vorrei prenotare un tavolo per due persone.",
        "Oggi fa molto caldo.",
        "Mio fratello lavora in banca.",
        "Quanto costa questo biglietto?",
        "Andiamo al mare domenica.",
        "Non capisco cosa vuoi dire.",
        "I bambini giocano nel giardino.",
        "Devo comprare il pane e il latte.",
        "Domani ho una riunione importante.",
        "Puoi aiutarmi con le valigie?",
        "Il treno parte alle otto.",
        "Ho perso le chiavi ieri sera.",
        "Mia nonna cucina benissimo.",
        "Grazie per l'aiuto, a domani.",
        "La cena è pronta, venite a tavola.",
    ],
    "nl": [
        "Waar is het station, alstublieft?",
        "Ik wil graag een tafel reserveren voor twee personen.",
        "Het is vandaag erg warm.",
        "Mijn broer werkt in een ziekenhuis.",
        "Hoeveel kost dit kaartje?",
        "We gaan zondag naar het strand.",
        "Ik begrijp niet wat je bedoelt.",
        "De kinderen spelen in de tuin.",
        "Ik moet brood en melk kopen.",
        "Morgen heb ik een belangrijke vergadering.",
        "Kun je me helpen met de koffers?",
        "De trein vertrekt om acht uur.",
        "Ik ben gisteravond mijn sleutels kwijtgeraakt.",
        "Mijn moeder kookt heel lekker.",
        "Bedankt voor je hulp, tot morgen.",
        "Wij fietsen elke dag naar school.",
    ],
    "pt": [
        "Onde fica a estação de comboios?",
        "Gostaria de reservar uma mesa para duas pessoas.",
        "Hoje está muito calor.",
        "O meu irmão trabalha num hospital.",
        "Quanto custa este livro?",
        "Vamos à praia no domingo.",
        "Não entendo o que você está dizendo.",
        "As crianças estão brincando no parque.",
        "Preciso comprar pão e leite.",
        "Amanhã tenho uma reunião importante.",
        "Você pode me ajudar com as malas?",
        "O trem sai às oito horas.",
        "Perdi as minhas chaves ontem à noite.",
        "A minha avó cozinha muito bem.",
        "Obrigado pela ajuda, até amanhã.",
        "Nós gostamos muito de café.",
    ],
    "pl": [
        "Gdzie jest dworzec kolejowy?",
        "Chciałbym zarezerwować stolik dla dwóch osób.",
        "Dzisiaj jest bardzo gorąco.",
        "Mój brat pracuje w szpitalu.",
        "Ile kosztuje ten bilet?",
        "Dziękuję za pomoc, do jutra.",
        "Dzieci bawią się w ogrodzie.",
    ],
    "tr": [
        "Tren istasyonu nerede?",
        "İki kişilik bir masa ayırtmak istiyorum.",
        "Bugün hava çok sıcak.",
        "Kardeşim bir hastanede çalışıyor.",
        "Bu bilet ne kadar?",
        "Yardımın için teşekkürler, yarın görüşürüz.",
        "Çocuklar bahçede oynuyor.",
    ],
    "sv": [
        "Var ligger tågstationen?",
        "Jag skulle vilja boka ett bord för två personer.",
        "Det är väldigt varmt idag.",
        "Min bror arbetar på ett sjukhus.",
        "Hur mycket kostar den här biljetten?",
        "Tack för hjälpen, vi ses imorgon.",
        "Barnen leker i trädgården.",
    ],
}


def served_mass(text: str) -> tuple[float, str, float]:
    """(the full model's mass on the served languages, its best language, that one's share)."""
    ranked = full_identifier().rank(readable(text))
    return sum(p for lang, p in ranked if lang in SERVED), ranked[0][0], ranked[0][1]


def refused(detector: Detector, text: str, mass: float) -> str | None:
    """The language `Detector.unserved` names for `text` with UNSERVED_MASS at `mass`."""
    shipped = detect.UNSERVED_MASS
    detect.UNSERVED_MASS = mass
    try:
        found = detector.unserved(text)
    finally:
        detect.UNSERVED_MASS = shipped
    return None if found is None else found[0]


def paragraphs(lines: list[str]) -> Iterator[str]:
    """The lines in order, 2, 3, 4, 2, 3, 4, ... at a time, joined by a space."""
    i, size = 0, 2
    while i + 1 < len(lines):
        yield " ".join(lines[i : i + size])
        i += size
        size = 2 + (size - 1) % 3


def corpus(detector: Detector, data: Path, masses: list[float], lowest: int) -> None:
    top = max(masses)
    for kind in ("lines", "paragraphs"):
        count = 0
        low: list[tuple[float, str]] = []  # candidates to refuse: mass under the largest value
        least: list[tuple[float, str, str, float, str]] = []  # (-mass, ...): a max-heap
        for name in CORPORA:
            lines = [t for t in (data / name).read_text(encoding="utf-8").splitlines() if t.strip()]
            texts = lines if kind == "lines" else list(paragraphs(lines))
            count += len(texts)
            for text in texts:
                mass, best, share = served_mass(text)
                if mass < top:
                    low.append((mass, text))
                item = (-mass, name, best, share, text)
                if len(least) < lowest:
                    heapq.heappush(least, item)
                elif item > least[0]:
                    heapq.heapreplace(least, item)
        print(f"\n## {kind}: {count} texts\n")
        for mass in masses:
            found = [(m, t, refused(detector, t, mass)) for m, t in sorted(low) if m < mass]
            found = [(m, t, lang) for m, t, lang in found if lang is not None]
            print(f"UNSERVED_MASS {mass:g}: {len(found)} refused")
            for m, text, lang in found:
                print(f"    {m:.2e} {lang}: {text}")
        print(f"\nthe {lowest} least masses on {'+'.join(SERVED)}:")
        for neg, name, best, share, text in sorted(least, reverse=True):
            print(f"    {-neg:.2e} {name} (best {best} {100 * share:.1f}%): {text[:100]}")


def borrowed(detector: Detector, masses: list[float]) -> None:
    print(f"\n## English and German with foreign words: {len(BORROWED)} sentences\n")
    for mass in masses:
        found = [t for t in BORROWED if refused(detector, t, mass) is not None]
        print(f"UNSERVED_MASS {mass:g}: {len(found)} refused")
        for text in found:
            m, best, share = served_mass(text)
            print(f"    {m:.2e} (best {best} {100 * share:.1f}%): {text}")
    print("\nthe 5 least masses on en+de:")
    for m, best, share, text in sorted((*served_mass(t), t) for t in BORROWED)[:5]:
        print(f"    {m:.2e} (best {best} {100 * share:.1f}%): {text}")


def foreign(detector: Detector, masses: list[float]) -> None:
    print("\n## other languages\n")
    print("| language | sentences | " + " | ".join(f"refused at {m:g}" for m in masses) + " |")
    print("| --- | --- |" + " --- |" * len(masses))
    totals = [0] * len(masses)
    through: list[str] = []
    for lang, texts in FOREIGN.items():
        counts = []
        for k, mass in enumerate(masses):
            n = sum(refused(detector, t, mass) is not None for t in texts)
            counts.append(n)
            totals[k] += n
        print(f"| {lang} | {len(texts)} | " + " | ".join(map(str, counts)) + " |")
        for text in texts:
            if refused(detector, text, max(masses)) is None:
                m, best, share = served_mass(text)
                through.append(f"    {lang} {m:.2e} (best {best} {100 * share:.1f}%): {text}")
    n = sum(map(len, FOREIGN.values()))
    print(f"| all | {n} | " + " | ".join(map(str, totals)) + " |")
    print(f"\nnot refused at {max(masses):g}:")
    print("\n".join(through) or "    none")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mass", type=float, nargs="+", default=[1e-3, 2e-3, 3e-3, 5e-3])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--lowest", type=int, default=12, help="how many of the least masses to list")
    args = p.parse_args()
    masses = sorted(args.mass)
    detector = Detector(list(SERVED), prefer="en")
    print(
        f"UNSERVED_MASS as shipped {detect.UNSERVED_MASS:g}, NAMED_CONFIDENCE "
        f"{detect.NAMED_CONFIDENCE:g}, SERVED_PART {detect.SERVED_PART:g}"
    )
    foreign(detector, masses)
    borrowed(detector, masses)
    corpus(detector, args.data, masses, args.lowest)
    return 0
