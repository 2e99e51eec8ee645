"""A peer's command line read as its own parser reads it: options from a table of the tool's options
(names and how many values each takes), argparse's unambiguous prefixes and vLLM's underscores where
the tool allows them, `--name=value`, repeated options kept in order. What is left unread is an error
in the tool's own words (its parser would refuse the line too)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tokenbench.errors import UsageError
from tokenbench.spec.profile_args import is_number

FLAG, ONE, MANY = 0, 1, 2        # an option takes no value, one value, or every value up to the next option


@dataclass(frozen=True)
class Table:
    """A tool's options: spelling -> (canonical name, arity)."""

    tool: str
    names: dict[str, tuple[str, int]]
    abbrev: bool = False             # argparse: any unambiguous prefix of a long option
    underscores: bool = False        # vLLM: `--num_prompts` is `--num-prompts`

    @classmethod
    def of(cls, tool: str, groups: Iterable[tuple[str, int]], abbrev: bool = False,
           underscores: bool = False) -> Table:
        """`groups`: ("--name --alias -n", arity); the first spelling is the canonical name."""
        names: dict[str, tuple[str, int]] = {}
        for spellings, arity in groups:
            first = spellings.split()[0]
            names.update({s: (first, arity) for s in spellings.split()})
        return cls(tool, names, abbrev, underscores)

    def resolve(self, word: str) -> tuple[str, int]:
        name = "--" + word[2:].replace("_", "-") if self.underscores and word.startswith("--") else word
        if name in self.names:
            return self.names[name]
        hits = {self.names[n] for n in self.names if self.abbrev and n.startswith("--") and n.startswith(name)}
        if len(hits) == 1:
            return hits.pop()
        if len(hits) > 1:
            raise UsageError(f"{self.tool}: {word} is ambiguous ({', '.join(sorted(h[0] for h in hits))}): "
                             "its own parser refuses it too", "spell the option out")
        raise UsageError(f"{word} is not an option of {self.tool}: its own parser refuses the line "
                         "(unrecognized arguments)", "check the option's name in the tool's --help")


@dataclass
class Given:
    """The options of a line: canonical name -> its values, one entry per occurrence (a flag: [])."""

    tool: str
    values: dict[str, list[list[str]]] = field(default_factory=dict)
    spellings: dict[str, str] = field(default_factory=dict)     # canonical name -> as the line wrote it

    def has(self, name: str) -> bool:
        return name in self.values

    def text(self, name: str) -> str | None:
        """The last value of an option (a later occurrence wins, as argparse)."""
        occ = self.values.get(name)
        return " ".join(occ[-1]) if occ else None

    def all(self, name: str) -> list[str]:
        """Every value of a repeatable or many-valued option, in order."""
        return [v for occ in self.values.get(name, []) for v in occ]

    def number(self, name: str, kind: type = float) -> float | None:
        raw = self.text(name)
        if raw is None:
            return None
        try:
            return kind(raw)
        except ValueError:
            raise UsageError(f"{self.tool} {name} {raw}: not a number", "give a number") from None

    def names(self) -> list[str]:
        return list(self.values)


def parse(words: list[str], table: Table) -> Given:
    """Read the options of `words` (the program's name already removed)."""
    out, i = Given(table.tool), 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word in ("-", "--"):
            raise UsageError(f"{table.tool}: unexpected argument '{word}' (its own parser refuses the line)",
                             "check the command line: a value may be missing its option, or a shell line "
                             "continuation (\\) broke it")
        spelled, eq, inline = word.partition("=")
        name, arity = table.resolve(spelled)
        values, i = ([inline], i + 1) if eq else _values(words, i + 1, arity)
        if eq and arity == FLAG:
            raise UsageError(f"{table.tool}: {name} takes no value", f"write {name} alone")
        if arity == ONE and len(values) != 1:
            raise UsageError(f"{table.tool}: {name} expects one value", f"write {name} VALUE")
        out.values.setdefault(name, []).append(values)
        out.spellings[name] = spelled
    return out


def _values(words: list[str], i: int, arity: int) -> tuple[list[str], int]:
    """The values after an option at `i`: none, the next word, or every word up to the next option."""
    if arity == FLAG:
        return [], i
    if arity == ONE:
        return (words[i:i + 1], i + 1)
    end = i
    while end < len(words) and not (words[end].startswith("-") and not is_number(words[end])):
        end += 1
    return words[i:end], end


