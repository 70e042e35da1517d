import anyio
import msgspec
from bindloop.agent import create_agent, equip_instruction, expect_validator, prompt_agent
from bindloop.hosts import create_model


class City(msgspec.Struct):
    name: str
    population: int


async def biggest_city(country: str) -> City:
    equip_instruction(f"What is the biggest city in {country}?")
    expect_validator(lambda city: city.population > 0 or "the population must be positive")
    return await prompt_agent(City)


agent = create_agent(handler=biggest_city, model=create_model("openai:gpt-5.1"))
print(anyio.run(agent, "Japan"))
