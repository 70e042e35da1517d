// Preloaded (node --require) into npm servers that call listen(port) without a host, which binds
// every interface: this pins them to 127.0.0.1 and prints the port actually bound, so a test can
// ask for port 0.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const callbacks = args.slice(1).filter((a) => typeof a === "function");
    this.once("listening", () => {
      process.stderr.write(`BINDLOOP_LISTENING ${this.address().port}\n`);
    });
    return listen.call(this, { port, host: "127.0.0.1" }, ...callbacks);
  }
  return listen.apply(this, args);
};
