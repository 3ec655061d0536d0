// An MCP server over stdio, built on the official TypeScript SDK, for what the published
// servers cannot show a test: a tool list that changes while the client is connected
// (`add-tool` registers `added`, and the SDK sends notifications/tools/list_changed), and
// whether a cancellation reached the server (`wait` reports progress once, runs until the client
// cancels it, then writes the cancellation's reason to the file named by $FIXTURE_CANCELLED).
import { writeFileSync } from "node:fs";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "openvaala-changing-server", version: "1.0.0" });

server.registerTool(
  "add-tool",
  { description: "Adds the tool `added` to this server's list", inputSchema: {} },
  async () => {
    server.registerTool(
      "added",
      { description: "A tool added while the client was connected", inputSchema: {} },
      async () => ({ content: [{ type: "text", text: "the added tool ran" }] }),
    );
    return { content: [{ type: "text", text: "added `added`" }] };
  },
);

server.registerTool(
  "wait",
  { description: "Waits until the call is cancelled", inputSchema: {} },
  async (_args, extra) => {
    // A progress line says the call has reached the server, so a test can cancel it then.
    const progressToken = extra._meta?.progressToken;
    if (progressToken !== undefined) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken, progress: 0, message: "waiting to be cancelled" },
      });
    }
    await new Promise((resolve) => extra.signal.addEventListener("abort", resolve, { once: true }));
    writeFileSync(process.env.FIXTURE_CANCELLED, String(extra.signal.reason ?? "cancelled"));
    return { content: [{ type: "text", text: "cancelled" }] };
  },
);

await server.connect(new StdioServerTransport());
