"""The server features beside tools -- resources, prompts and argument completion -- as functions
over an :class:`~bindloop.mcp.McpHttpClient` (listing with pagination, reading, subscribing,
getting a prompt, completing an argument), and their contents as bindloop content parts
(:func:`resource_parts`) and messages (:func:`prompt_messages`). See docs/mcp.md.
"""

from ._features import (
    CompletionResult as CompletionResult,
    McpPrompt as McpPrompt,
    McpPromptArgument as McpPromptArgument,
    McpResource as McpResource,
    McpResourceTemplate as McpResourceTemplate,
    PromptResult as PromptResult,
    ResourceContents as ResourceContents,
    complete as complete,
    get_prompt as get_prompt,
    list_prompts as list_prompts,
    list_resource_templates as list_resource_templates,
    list_resources as list_resources,
    prompt_messages as prompt_messages,
    read_resource as read_resource,
    resource_parts as resource_parts,
    subscribe_resource as subscribe_resource,
    unsubscribe_resource as unsubscribe_resource,
)

__all__ = (
    "CompletionResult",
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpResourceTemplate",
    "PromptResult",
    "ResourceContents",
    "complete",
    "get_prompt",
    "list_prompts",
    "list_resource_templates",
    "list_resources",
    "prompt_messages",
    "read_resource",
    "resource_parts",
    "subscribe_resource",
    "unsubscribe_resource",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
