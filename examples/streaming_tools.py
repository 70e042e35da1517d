import anyio
from bindloop.agent import create_agent, stream_text
from bindloop.hosts import create_model
from bindloop.tools import define_tool


@define_tool
def weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny and 24C in {city}"


@define_tool
def local_time(city: str) -> str:
    """The local time in a city."""
    return f"It is 14:05 in {city}"


async def main() -> None:
    agent = create_agent(model=create_model("openai:gpt-5.1"), tools=[weather, local_time])
    async with stream_text(agent, initial_props="Weather and time in Lisbon?") as chunks:
        async for text in chunks:
            print(text, end="", flush=True)


anyio.run(main)
