"""bertscope: see and use every embedding of a BERT-family model.

import bertscope
m = bertscope.load()                 # the bundled all-MiniLM-L6-v2
m.static("bread"); m.anatomy("I am Sinan"); m.embed(["a cat", "a dog"], layers="-2")
"""

from typing import TYPE_CHECKING, Any

from .core.loaders import register_loader as _register_loader
from .core.version import __version__ as __version__  # its one home, below every floor

if TYPE_CHECKING:
    from .anatomy import Anatomy
    from .core._enums import (
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
    from .core.families import SUPPORTED
    from .core.forward import ForwardOutput
    from .core.results import ChunkEmbeddings, SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
    from .core.similarity import Hit, cos_sim, pairwise_cos_sim
    from .core.spec import EmbedSpec
    from .core.tokens import Tokens
    from .errors import (
        BackendUnavailable,
        BertscopeError,
        CorpusError,
        InputTooLong,
        InvalidInput,
        InvalidSpec,
        JobInterrupted,
        ModelLoadError,
        NonFiniteVectors,
        NotPicklable,
        TruncatedTextsWarning,
        UnknownOption,
        UnknownToken,
        UnsupportedArchitecture,
    )
    from .explain import Explanation
    from .io.job import JobSummary, embed_corpus
    from .io.occurrences import Occurrence, Occurrences, search_occurrences
    from .io.search import search
    from .io.sqlite_reader import list_collections
    from .model import Model, ModelInfo, load
    from .research.aggregate import AggregatedStatic
    from .research.baseline import Baseline
    from .research.cka import CkaResult
    from .research.compare import compare
    from .research.contextuality import Contextuality
    from .research.distill import distill
    from .research.geometry import GeometryResult
    from .research.probe_score import ProbeResult
    from .research.senses import Sense, Senses, word_senses
    from .research.static_kinds import DecontextualizedStatic
    from .research.structural import StructuralResult
    from .static import Neighbor, StaticWord
    from .static_model import StaticModel
    from .verify.fingerprint import FingerprintCheck
    from .verify.reference import Verification
    from .verify.store import verify_store

# Where each public name lives; a name's module is imported on first use (PEP 562), so
# `import bertscope` and the command line's help cost no torch.
_LAZY = {
    "Backend": ".core._enums",
    "Combine": ".core._enums",
    "DType": ".core._enums",
    "Engine": ".core._enums",
    "LongText": ".core._enums",
    "Mode": ".core._enums",
    "Pooling": ".core._enums",
    "Quantize": ".core._enums",
    "Level": ".core._enums",
    "Precision": ".core._enums",
    "SubwordPooling": ".core._enums",
    "Anatomy": ".anatomy",
    "EmbedSpec": ".core.spec",
    "BackendUnavailable": ".errors",
    "BertscopeError": ".errors",
    "CorpusError": ".errors",
    "InputTooLong": ".errors",
    "NonFiniteVectors": ".errors",
    "NotPicklable": ".errors",
    "InvalidInput": ".errors",
    "InvalidSpec": ".errors",
    "ModelLoadError": ".errors",
    "UnknownToken": ".errors",
    "UnsupportedArchitecture": ".errors",
    "SUPPORTED": ".core.families",
    "JobInterrupted": ".errors",
    "TruncatedTextsWarning": ".errors",
    "UnknownOption": ".errors",
    "JobSummary": ".io.job",
    "embed_corpus": ".io.job",
    "list_collections": ".io.sqlite_reader",
    "search": ".io.search",
    "search_occurrences": ".io.occurrences",
    "Occurrence": ".io.occurrences",
    "Occurrences": ".io.occurrences",
    "word_senses": ".research.senses",
    "Senses": ".research.senses",
    "Model": ".model",
    "StaticModel": ".static_model",
    "ModelInfo": ".model",
    "load": ".model",
    "SentenceEmbeddings": ".core.results",
    "TokenEmbeddings": ".core.results",
    "WordEmbeddings": ".core.results",
    # what the Model's other methods return, named here so a caller can type and isinstance them
    "ChunkEmbeddings": ".core.results",
    "ForwardOutput": ".core.forward",
    "Explanation": ".explain",
    "Baseline": ".research.baseline",
    "CkaResult": ".research.cka",
    "Contextuality": ".research.contextuality",
    "GeometryResult": ".research.geometry",
    "ProbeResult": ".research.probe_score",
    "Sense": ".research.senses",
    "StructuralResult": ".research.structural",
    "FingerprintCheck": ".verify.fingerprint",
    "Verification": ".verify.reference",
    "Hit": ".core.similarity",
    "cos_sim": ".core.similarity",
    "pairwise_cos_sim": ".core.similarity",
    "Neighbor": ".static",
    "StaticWord": ".static",
    "Tokens": ".core.tokens",
    "distill": ".research.distill",
    "AggregatedStatic": ".research.aggregate",
    "DecontextualizedStatic": ".research.static_kinds",
    "compare": ".research.compare",
    "verify_store": ".verify.store",
}

__all__ = [
    "load",
    "embed_corpus",
    "search",
    "search_occurrences",
    "word_senses",
    "distill",
    "compare",
    "verify_store",
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
    "TruncatedTextsWarning",
    "UnknownOption",
    "Model",
    "StaticModel",
    "ModelInfo",
    "Tokens",
    "Anatomy",
    "StaticWord",
    "Neighbor",
    "EmbedSpec",
    "SentenceEmbeddings",
    "TokenEmbeddings",
    "WordEmbeddings",
    "ChunkEmbeddings",
    "ForwardOutput",
    "Explanation",
    "Baseline",
    "CkaResult",
    "Contextuality",
    "GeometryResult",
    "ProbeResult",
    "Sense",
    "StructuralResult",
    "FingerprintCheck",
    "Verification",
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
    "NonFiniteVectors",
    "NotPicklable",
    "CorpusError",
]


def _load(name: Any = None, **settings: Any) -> Any:
    """`load`, imported on first use: the loader that modules below the facade call (core/loaders.py)."""
    from .model import load

    return load(name, **settings)


_register_loader(_load)


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
