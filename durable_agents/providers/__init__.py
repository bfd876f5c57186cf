"""Model providers: one neutral request in (``ModelRequest``), one assistant turn out
(``ModelResponse``), over the official ``anthropic`` and ``openai`` SDKs, any
OpenAI-compatible server, and the deterministic offline ``scripted:`` model.

Usable on their own, without a worker or a Temporal server: ``ProviderRegistry().get(
"anthropic")`` (in ``registry``) builds a provider and ``await provider.generate(request)``
asks it. The model activity calls them inside Temporal; a provider never retries (Temporal
does), and its failures (Temporal ``ApplicationError``s, ``base``) say whether a retry can
help. Nothing here imports the workflows, the activities or what users define.
"""
