// The compare page: the compare panel mounted by the page host (hosts/page.js) in the page's <main>.

import { mountPage } from "../hosts/page.js";
import * as panel from "../panels/compare.js";

mountPage(panel);
