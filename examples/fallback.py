import anyio
from bindloop.agent import create_agent
from bindloop.hosts import create_model

model = create_model("anthropic:claude-sonnet-4-5", fallback="openai:gpt-5.1")
agent = create_agent(model=model, instructions="Answer in one sentence.")
print(anyio.run(agent, "Why is the sky blue?").data)
