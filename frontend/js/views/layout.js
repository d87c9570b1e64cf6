// The layout page: the layout panel mounted by the page host (hosts/page.js) in the page's <main>.

import { mountPage } from "../hosts/page.js";
import * as panel from "../panels/layout.js";

mountPage(panel);
