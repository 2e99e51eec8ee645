"""The ports tokenbench may open for others to reach, declared once: `PORT` or `LO-HI` (`--ports`, the study's
`target.ports`, `deploy up --ports`, the port of `--otlp-listen HOST:PORT|HOST:LO-HI`). Pure data; the
binding is deploy/ports.py (`free_port`)."""

from __future__ import annotations

from dataclasses import dataclass

PORTS_HELP = ("the ports tokenbench may open for others to reach, PORT or LO-HI: an engine it deploys (unless its "
              "profile fixes `port`) and its OTLP receiver (unless --otlp-listen names a port), each the first free "
              "one of the range; default: any free port")


@dataclass(frozen=True)
class PortRange:
    """Ports lo..hi (inclusive); 0..0 is any free port."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """`PORT` or `LO-HI` (ValueError with the form otherwise)."""
        lo, dash, hi = text.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"'{text}' is not a port or a range of ports: give PORT or LO-HI, e.g. 20000-20100")
        first, last = int(lo), int(hi if dash else lo)
        if not 0 <= first <= last <= 65535 or (dash and first == 0):
            raise ValueError(f"'{text}': ports are 1-65535 and a range is LO-HI with LO <= HI (0 alone: any free one)")
        return cls(first, last)

    @property
    def any(self) -> bool:
        return self.hi == 0

    def __iter__(self):
        return iter(range(self.lo, self.hi + 1))

    @property
    def text(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


def check_ports(text: str | None) -> str | None:
    """A spec field's validator: the text is a port or a range (kept as text: the stored spec reads as given)."""
    if text is not None:
        PortRange.parse(text)
    return text


def split_listen(listen: str) -> tuple[str, PortRange]:
    """`HOST:PORT` or `HOST:LO-HI` (an IPv6 host in brackets) -> (host, ports); ValueError with the form."""
    host, sep, ports = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"'{listen}' is not HOST:PORT or HOST:LO-HI (e.g. 127.0.0.1:4318; port 0: a free one)")
    return host, PortRange.parse(ports)
