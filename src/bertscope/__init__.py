"""bertscope: see and use every embedding of a BERT-family model.

import bertscope
m = bertscope.load()                 # the bundled all-MiniLM-L6-v2
m.static("bread"); m.anatomy("I am Sinan"); m.embed(["a cat", "a dog"], layers="-2")
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._enums import (
        Backend,
        Combine,
        DType,
        Engine,
        Level,
        LongText,
        Mode,
        Pooling,
        Precision,
        Quantize,
        SubwordPooling,
    )
    from .anatomy import Anatomy
    from .errors import (
        BackendUnavailable,
        BertscopeError,
        CorpusError,
        InputTooLong,
        InvalidInput,
        InvalidSpec,
        JobInterrupted,
        ModelLoadError,
        UnknownToken,
        UnsupportedArchitecture,
    )
    from .families import SUPPORTED
    from .io.job import JobSummary, embed_corpus
    from .io.occurrences import Occurrence, Occurrences, search_occurrences
    from .io.sqlite_store import list_collections
    from .io.stores import search
    from .model import Model, ModelInfo, load
    from .research.aggregate import AggregatedStatic
    from .research.compare import compare
    from .research.distill import distill
    from .research.static_kinds import DecontextualizedStatic
    from .results import SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
    from .senses import Senses, word_senses
    from .similarity import Hit, cos_sim, pairwise_cos_sim
    from .spec import EmbedSpec
    from .static import Neighbor, StaticWord
    from .tokens import Tokens

# Where each public name lives; a name's module is imported on first use (PEP 562), so
# `import bertscope` and the command line's help cost no torch.
_LAZY = {
    "Backend": "._enums",
    "Combine": "._enums",
    "DType": "._enums",
    "Engine": "._enums",
    "LongText": "._enums",
    "Mode": "._enums",
    "Pooling": "._enums",
    "Quantize": "._enums",
    "Level": "._enums",
    "Precision": "._enums",
    "SubwordPooling": "._enums",
    "Anatomy": ".anatomy",
    "EmbedSpec": ".spec",
    "BackendUnavailable": ".errors",
    "BertscopeError": ".errors",
    "CorpusError": ".errors",
    "InputTooLong": ".errors",
    "InvalidInput": ".errors",
    "InvalidSpec": ".errors",
    "ModelLoadError": ".errors",
    "UnknownToken": ".errors",
    "UnsupportedArchitecture": ".errors",
    "SUPPORTED": ".families",
    "JobInterrupted": ".errors",
    "JobSummary": ".io.job",
    "embed_corpus": ".io.job",
    "list_collections": ".io.sqlite_store",
    "search": ".io.stores",
    "search_occurrences": ".io.occurrences",
    "Occurrence": ".io.occurrences",
    "Occurrences": ".io.occurrences",
    "word_senses": ".senses",
    "Senses": ".senses",
    "Model": ".model",
    "ModelInfo": ".model",
    "load": ".model",
    "SentenceEmbeddings": ".results",
    "TokenEmbeddings": ".results",
    "WordEmbeddings": ".results",
    "Hit": ".similarity",
    "cos_sim": ".similarity",
    "pairwise_cos_sim": ".similarity",
    "Neighbor": ".static",
    "StaticWord": ".static",
    "Tokens": ".tokens",
    "distill": ".research.distill",
    "AggregatedStatic": ".research.aggregate",
    "DecontextualizedStatic": ".research.static_kinds",
    "compare": ".research.compare",
}

__version__ = "0.1.0"

__all__ = [
    "load",
    "embed_corpus",
    "search",
    "search_occurrences",
    "word_senses",
    "distill",
    "compare",
    "AggregatedStatic",
    "DecontextualizedStatic",
    "Occurrence",
    "Occurrences",
    "Senses",
    "list_collections",
    "cos_sim",
    "pairwise_cos_sim",
    "Hit",
    "JobSummary",
    "JobInterrupted",
    "Model",
    "ModelInfo",
    "Tokens",
    "Anatomy",
    "StaticWord",
    "Neighbor",
    "EmbedSpec",
    "SentenceEmbeddings",
    "TokenEmbeddings",
    "WordEmbeddings",
    "Pooling",
    "Combine",
    "LongText",
    "SubwordPooling",
    "Level",
    "Precision",
    "Backend",
    "Quantize",
    "Mode",
    "DType",
    "Engine",
    "SUPPORTED",
    "BertscopeError",
    "ModelLoadError",
    "UnsupportedArchitecture",
    "InvalidSpec",
    "BackendUnavailable",
    "InvalidInput",
    "UnknownToken",
    "InputTooLong",
    "CorpusError",
]


def __getattr__(name: str) -> Any:
    """Import the module that holds `name` on first use, then keep the name here."""
    if name not in _LAZY:
        raise AttributeError(f"module 'bertscope' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
