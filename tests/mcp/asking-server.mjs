// An MCP server over stdio, built on the official TypeScript SDK, that talks back to its
// client while a call runs: `ask` asks the user a question (elicitation, with a form of three
// fields), `summarize` asks the client's model for a completion (sampling), and `index` sends
// progress notifications with messages.
import { existsSync } from "node:fs";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

// $FIXTURE_START_GATE names a file: the server starts only once it exists, so a test decides
// when a slow start ends.
const gate = process.env.FIXTURE_START_GATE;
// A client that goes away while the server waits (a test that failed) ends it: nothing is left.
process.stdin.on("end", () => process.exit(0));
while (gate && !existsSync(gate)) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}

const server = new McpServer({ name: "openvaala-asking-server", version: "1.0.0" });

server.registerTool(
  "ask",
  { description: "Asks the user where to deploy, then says what they answered", inputSchema: {} },
  async () => {
    const answer = await server.server.elicitInput({
      message: "Where should the service be deployed?",
      requestedSchema: {
        type: "object",
        properties: {
          environment: {
            type: "string",
            title: "Environment",
            enum: ["staging", "production"],
          },
          replicas: {
            type: "integer",
            title: "Replicas",
            description: "How many copies run",
            minimum: 1,
            maximum: 10,
          },
          confirm: { type: "boolean", title: "Run the migrations too" },
        },
        required: ["environment"],
      },
    });
    const content = answer.content === undefined ? "" : ` ${JSON.stringify(answer.content)}`;
    return { content: [{ type: "text", text: `answer: ${answer.action}${content}` }] };
  },
);

server.registerTool(
  "summarize",
  { description: "Summarizes the release notes with the client's model", inputSchema: {} },
  async () => {
    const result = await server.server.createMessage({
      messages: [{ role: "user", content: { type: "text", text: "Summarize: the release notes" } }],
      systemPrompt: "You write one-line summaries.",
      maxTokens: 200,
    });
    const said = result.content.type === "text" ? result.content.text : `[${result.content.type}]`;
    return { content: [{ type: "text", text: `sampled by ${result.model}: ${said}` }] };
  },
);

server.registerTool(
  "index",
  { description: "Indexes the files, telling its progress", inputSchema: {} },
  async (_args, extra) => {
    const progressToken = extra._meta?.progressToken;
    const steps = ["reading files", "indexing files"];
    for (const [done, message] of steps.entries()) {
      if (progressToken !== undefined) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken, progress: done + 1, total: steps.length, message },
        });
      }
    }
    return { content: [{ type: "text", text: "indexed 2 files" }] };
  },
);

await server.connect(new StdioServerTransport());
