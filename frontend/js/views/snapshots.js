// The snapshots page: the snapshot panel mounted by the page host (hosts/page.js) in the page's <main>.

import { mountPage } from "../hosts/page.js";
import * as panel from "../panels/snapshot.js";

mountPage(panel);
