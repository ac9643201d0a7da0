// The Probot reference of the `bench` binary's ingest section: a Probot
// app with a handler that does nothing, behind Probot's own Node
// middleware, so each request costs what Probot spends to take a webhook
// (read the body, check the signature, parse the JSON, dispatch the
// event) and nothing is stored. The bench runs this file from a folder
// whose `node_modules` is the pinned install (scripts/install-bench-tools.sh).
//
// Environment: BENCH_PORT (to listen on, on 127.0.0.1), BENCH_SECRET (the
// webhook secret), BENCH_PATH (the webhook path). Prints `listening` once
// the server accepts connections.
import { createServer } from "node:http";
import { generateKeyPairSync } from "node:crypto";
import { Probot, createNodeMiddleware } from "probot";

// Probot insists on App credentials although a no-op handler never calls
// GitHub: a throwaway key made here.
const { privateKey } = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs8", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
});

const probot = new Probot({
  appId: 1,
  privateKey,
  secret: process.env.BENCH_SECRET,
  // Probot's request logging would write a line per delivery to a pipe
  // nobody reads; warnings still show.
  logLevel: "warn",
});

const app = (robot) => {
  robot.on("issue_comment.created", async () => {});
};

const middleware = await createNodeMiddleware(app, {
  probot,
  webhooksPath: process.env.BENCH_PATH,
});

const server = createServer((request, response) => {
  middleware(request, response, () => {
    response.writeHead(404).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.BENCH_PORT), "127.0.0.1", () => {
  console.log("listening");
});
