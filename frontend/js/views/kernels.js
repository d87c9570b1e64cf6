// The kernels page: the kernels panel mounted by the page host (hosts/page.js) in the page's <main>.

import { mountPage } from "../hosts/page.js";
import * as panel from "../panels/kernels.js";

mountPage(panel);
