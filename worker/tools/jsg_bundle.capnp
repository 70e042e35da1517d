@0xd41c7a9e5b3f2a61;
# The wire shape of workerd's `workerd::jsg::Bundle`, as far as a Pyodide bundle needs it.
# Cap'n Proto lays a struct out from its fields' ordinals and types alone, so declaring fields
# @0..@6 with workerd's ordinals and types yields the same encoding; later fields that workerd
# added (a compile cache) are left out and read as unset.

struct Bundle {
  modules @0 :List(Module);
}

struct Module {
  name @0 :Text;
  union {
    src @1 :Data;   # ES module source
    wasm @4 :Data;  # compiled by workerd as a WebAssembly.Module
    data @5 :Data;  # an ArrayBuffer
    json @6 :Text;
  }
  tsDeclaration @3 :Text;
  type @2 :ModuleType;
}

enum ModuleType {
  user @0;
  builtin @1;
  internal @2;  # importable only by the runtime's own modules
}
