// The layout explorer's old entry point, kept for addresses that load /js/main.js: index.html loads
// views/layout.js itself.
import "./views/layout.js";
