# Serve with: uvicorn chat_endpoint:app --port 8787  (POST /api/chat for useChat, POST /ag-ui)
from bindloop.hosts import create_model
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.agent import agent_runner
from bindloop.tools import define_tool


@define_tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


app = ChatApp(agent_runner(create_model("openai:gpt-5.1"), tools=[word_count]))
