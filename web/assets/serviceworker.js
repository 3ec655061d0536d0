// Registers the service worker (/sw.js, written from web/root/sw.js) that keeps the app's own
// files, so the page opens at once, also installed as an app, when the service cannot be
// reached. Browsers offer service workers only in a secure context (https:, or http:// on
// localhost and 127.0.0.1); elsewhere the page simply works online only. Registered once the
// page has loaded, so keeping the files never slows its first start.

export function registerServiceWorker() {
  if (!('serviceWorker' in navigator)) return;
  const register = () =>
    navigator.serviceWorker.register('/sw.js', { scope: '/', updateViaCache: 'none' }).catch((error) => {
      // The page works without it, only not offline.
      console.warn(`The service worker could not be registered: ${error.message}`);
    });
  if (document.readyState === 'complete') register();
  else window.addEventListener('load', register, { once: true });
}
