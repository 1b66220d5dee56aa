"""The Textual app: Chat, Models, Server and Stats over one in-process engine."""
