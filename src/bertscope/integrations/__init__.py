"""bertscope inside other frameworks (LangChain, LlamaIndex), each an optional extra."""
