"""The testing kit: scripted models, a loop harness, deterministic clocks and a recording sink.

Credential-free, multi-turn, multi-tool tests without mocking a chat client. Not re-exported from the
package root: import it as ``bindloop.testing``.
"""

from ._clock import (
    RecordingSink as RecordingSink,
    SteppingClock as SteppingClock,
    recording_sink as recording_sink,
    stepping_clock as stepping_clock,
)
from ._harness import LoopHarness as LoopHarness, ToolFn as ToolFn, loop_harness as loop_harness
from ._stream_model import (
    ScriptedStreamModel as ScriptedStreamModel,
    StreamRequest as StreamRequest,
    scripted_stream_model as scripted_stream_model,
)
from ._script import (
    FunctionModel as FunctionModel,
    ScriptedModel as ScriptedModel,
    final_answer as final_answer,
    fresh_state as fresh_state,
    function_model as function_model,
    scripted_model as scripted_model,
    tool_call as tool_call,
    tool_call_turn as tool_call_turn,
)
from ._errors import ScriptExhaustedError as ScriptExhaustedError

__all__ = (
    "FunctionModel",
    "LoopHarness",
    "RecordingSink",
    "ScriptExhaustedError",
    "ScriptedModel",
    "ScriptedStreamModel",
    "StreamRequest",
    "SteppingClock",
    "ToolFn",
    "final_answer",
    "fresh_state",
    "function_model",
    "loop_harness",
    "recording_sink",
    "scripted_model",
    "scripted_stream_model",
    "stepping_clock",
    "tool_call",
    "tool_call_turn",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
