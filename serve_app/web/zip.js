// Download all: originals, results and metadata of every photo in one ZIP, written here (STORE, no compression).
"use strict";

// ---------------------------------------------------------------- download all: a STORE zip

async function downloadAll() {
  const entries = [];
  for (const [index, item] of state.items.entries()) {
    const prefix = `${String(index + 1).padStart(2, "0")}-`;
    entries.push({ name: `originals/${prefix}${item.file.name}`, data: item.file });
    if (item.outcome && item.outcome.ok) {
      // The result and its companions (an ID photo's print sheet and HD copy).
      const images = [["", item.outcome.result], ["-sheet", item.outcome.sheet], ["-hd", item.outcome.hd]];
      for (const [suffix, blob] of images) {
        if (blob) entries.push({ name: `results/${prefix}${resultName(item, suffix, blob)}`, data: blob });
      }
    }
    const metadata = new Blob([JSON.stringify(metadataOf(item), null, 2)], { type: "application/json" });
    entries.push({ name: `metadata/${prefix}${stem(item.file.name)}.json`, data: metadata });
  }
  const zip = await zipStore(entries);
  const anchor = link(URL.createObjectURL(zip), "portrait-results.zip", "");
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(anchor.href), 60000);
}

function metadataOf(item) {
  const source = { name: item.file.name, size: item.file.size, type: item.file.type };
  if (!item.outcome) return { source, status: "not run" };
  const { job, ok } = item.outcome;
  if (!ok) return { source, job, status: "failed", http_status: item.outcome.status, error: item.outcome.error };
  return { source, job, status: "done", response: item.outcome.response };
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function dosDateTime(date) {
  const time = (date.getHours() << 11) | (date.getMinutes() << 5) | (date.getSeconds() >> 1);
  const day = ((date.getFullYear() - 1980) << 9) | ((date.getMonth() + 1) << 5) | date.getDate();
  return { time, day };
}

/** A ZIP with every entry STOREd (no compression): local headers, data, central directory, end record. */
async function zipStore(entries) {
  const encoder = new TextEncoder();
  const { time, day } = dosDateTime(new Date());
  const parts = [];
  const directory = [];
  let offset = 0;
  for (const entry of entries) {
    const name = encoder.encode(entry.name);
    const data = new Uint8Array(await entry.data.arrayBuffer());
    const fields = { name, crc: crc32(data), size: data.length, time, day, offset };
    const local = zipHeader(0x04034b50, fields, false);
    parts.push(local, data);
    directory.push(zipHeader(0x02014b50, fields, true));
    offset += local.length + data.length;
  }
  const directorySize = directory.reduce((sum, header) => sum + header.length, 0);
  return new Blob([...parts, ...directory, zipEnd(entries.length, directorySize, offset)], { type: "application/zip" });
}

function zipHeader(signature, f, central) {
  const header = new DataView(new ArrayBuffer((central ? 46 : 30) + f.name.length));
  let at = 0;
  const u16 = (value) => { header.setUint16(at, value, true); at += 2; };
  const u32 = (value) => { header.setUint32(at, value, true); at += 4; };
  u32(signature);
  if (central) u16(20);           // version made by
  u16(20);                        // version needed to extract
  u16(0x0800);                    // flags: names are UTF-8
  u16(0);                         // method: STORE
  u16(f.time);
  u16(f.day);
  u32(f.crc);
  u32(f.size);                    // compressed size
  u32(f.size);                    // uncompressed size
  u16(f.name.length);
  u16(0);                         // extra field length
  if (central) {
    u16(0);                       // comment length
    u16(0);                       // disk number
    u16(0);                       // internal attributes
    u32(0);                       // external attributes
    u32(f.offset);                // local header offset
  }
  const bytes = new Uint8Array(header.buffer);
  bytes.set(f.name, at);
  return bytes;
}

function zipEnd(count, directorySize, directoryOffset) {
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, count, true);
  end.setUint16(10, count, true);
  end.setUint32(12, directorySize, true);
  end.setUint32(16, directoryOffset, true);
  return new Uint8Array(end.buffer);
}
