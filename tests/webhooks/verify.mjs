// Checks one POST the service made with the Standard Webhooks reference verifier
// (`standardwebhooks`, installed here by `npm ci --prefix tests/webhooks`).
//
// Reads one JSON object on standard input: {"secret": "whsec_…", "headers": {name: value},
// "body": "<the raw body, as received>"}. Exits 0 only if `Webhook.verify` accepts it;
// otherwise prints the verifier's reason and exits 1.
import { Webhook } from "standardwebhooks";

let input = "";
for await (const chunk of process.stdin) {
  input += chunk;
}
const { secret, headers, body } = JSON.parse(input);
try {
  new Webhook(secret).verify(body, headers);
  console.log("verified");
} catch (error) {
  console.log(`not verified: ${error.message}`);
  process.exit(1);
}
