// What the console's browser tests share: Debian's chromium driven by playwright-core, the page built
// if it is missing, and screenshots at 1280 and 390 px under test-results/console/ with the phone
// layout's checks.
import { existsSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { CONSOLE_DIST } from '../../src/console/static.ts';

export const SHOTS = resolve('test-results/console');
const CHROMIUM = process.env.METARELAY_CHROMIUM ?? '/usr/bin/chromium';
export const WIDE = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/** The browser, with the console page built first when the folder was cleaned since `npm ci` built it (prepare). */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(resolve(CONSOLE_DIST, 'index.html'))) {
    const { build } = await import('vite');
    await build({ configFile: resolve('console/vite.config.mjs') });
  }
  mkdirSync(SHOTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/**
 * Screenshots of the page at 1280 and at 390 px. On the phone the page itself never scrolls sideways
 * (a table scrolls inside its card or reflows), and every nav link sits on the header's dark bar.
 */
export async function shot(page: Page, name: string) {
  await page.screenshot({ path: resolve(SHOTS, `${name}-1280.png`), fullPage: true });
  await page.setViewportSize(PHONE);
  const layout = await page.evaluate(() => {
    const header = document.querySelector('header')?.getBoundingClientRect();
    const links = [...document.querySelectorAll('header nav a')].map((a) => a.getBoundingClientRect());
    return {
      overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      outside: header ? links.filter((l) => l.bottom > header.bottom || l.right > header.right || l.top < header.top).length : 0,
    };
  });
  expect(layout.overflow, `${name}: the page scrolls sideways at 390 px`).toBeLessThanOrEqual(0);
  expect(layout.outside, `${name}: nav links outside the header at 390 px`).toBe(0);
  await page.screenshot({ path: resolve(SHOTS, `${name}-390.png`), fullPage: true });
  await page.setViewportSize(WIDE);
}

/** Signs the page in with an admin token. */
export async function signIn(page: Page, baseUrl: string, adminToken: string) {
  await page.goto(`${baseUrl}/console/`);
  await page.getByTestId('admin-token').fill(adminToken);
  await page.getByTestId('sign-in').click();
  await page.getByTestId('nav-projects').waitFor();
}

/** An <img>'s natural width once it has loaded (0 until then, or if it failed). */
export const loadedWidth = (img: Element) => ((img as HTMLImageElement).complete ? (img as HTMLImageElement).naturalWidth : 0);
