// Drives `autoforge setup` in headless Chromium as a person would: open the
// local page, press its button, confirm on (fake) GitHub's page, and wait for
// the page saying the App was saved. Screenshots of each step go to the
// directory given. Prints one JSON line with what each page said.
//
//     node setup-flow.cjs SETUP_URL SCREENSHOT_DIR
//
// PLAYWRIGHT_CORE_PATH names the playwright-core package
// (scripts/install-browser-tools.sh); CHROMIUM the browser (default chromium).
'use strict';

const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE_PATH);

async function main() {
  const [setupUrl, shots] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(setupUrl);
    const start = await page.textContent('h1');
    await page.screenshot({ path: path.join(shots, '1-setup-page.png'), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click('#create')]);
    const confirm = await page.textContent('h1');
    await page.screenshot({ path: path.join(shots, '2-github-confirm.png'), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await page.waitForSelector('#created, #failed', { timeout: 30000 });
    const done = await page.textContent('h1');
    const detail = await page.textContent('#created, #failed');
    await page.screenshot({ path: path.join(shots, '3-saved.png'), fullPage: true });
    process.stdout.write(JSON.stringify({ start, confirm, done, detail, url: page.url() }) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack || error) + '\n');
  process.exit(1);
});
