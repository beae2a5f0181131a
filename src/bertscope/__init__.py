"""bertscope: see and use every embedding of a BERT-family model.

import bertscope
m = bertscope.load()                 # the bundled all-MiniLM-L6-v2
m.static("bread"); m.anatomy("I am Sinan"); m.embed(["a cat", "a dog"], layers="-2")
"""

from ._enums import (
    Backend,
    Combine,
    DType,
    Engine,
    Level,
    LongText,
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
    ModelLoadError,
    UnknownToken,
    UnsupportedArchitecture,
)
from .families import SUPPORTED
from .io.job import JobInterrupted, JobSummary, embed_corpus
from .io.occurrences import Occurrence, Occurrences, search_occurrences
from .io.sqlite_store import list_collections
from .io.stores import search
from .model import Model, ModelInfo, load
from .results import SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
from .senses import Senses, word_senses
from .similarity import Hit, cos_sim, pairwise_cos_sim
from .spec import EmbedSpec
from .static import Neighbor, StaticWord
from .tokens import Tokens

__version__ = "0.1.0"

__all__ = [
    "load",
    "embed_corpus",
    "search",
    "search_occurrences",
    "word_senses",
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
