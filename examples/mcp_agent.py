import sys

import anyio
from bindloop.agent import create_agent
from bindloop.hosts import create_model, mcp_tools


async def main() -> None:
    async with mcp_tools(sys.argv[1], server="calc") as calc:
        agent = create_agent(model=create_model("openai:gpt-5.1"), tools=calc.tools)
        print((await agent("What is 2 + 3?")).data)


anyio.run(main)
