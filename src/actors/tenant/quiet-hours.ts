/**
 * Quiet hours in the recipient's time zone: the zone a phone number lies in
 * (a compact table, below), whether a local time falls in the quiet window,
 * and the instant the window next ends. Pure functions of their arguments;
 * the formatters are cached per zone.
 */

/** A daily window of local wall-clock time, `HH:MM` to `HH:MM`; past midnight when `start` is later than `end`. */
export interface QuietWindow {
  start: string;
  end: string;
}

/** Country calling codes of countries with one time zone (or one that nearly all their numbers live in). */
const countryZones: Record<string, string> = {
  '20': 'Africa/Cairo',
  '27': 'Africa/Johannesburg',
  '30': 'Europe/Athens',
  '31': 'Europe/Amsterdam',
  '32': 'Europe/Brussels',
  '33': 'Europe/Paris',
  '34': 'Europe/Madrid',
  '36': 'Europe/Budapest',
  '39': 'Europe/Rome',
  '40': 'Europe/Bucharest',
  '41': 'Europe/Zurich',
  '43': 'Europe/Vienna',
  '44': 'Europe/London',
  '45': 'Europe/Copenhagen',
  '46': 'Europe/Stockholm',
  '47': 'Europe/Oslo',
  '48': 'Europe/Warsaw',
  '49': 'Europe/Berlin',
  '51': 'America/Lima',
  '53': 'America/Havana',
  '54': 'America/Argentina/Buenos_Aires',
  '56': 'America/Santiago',
  '57': 'America/Bogota',
  '58': 'America/Caracas',
  '60': 'Asia/Kuala_Lumpur',
  '63': 'Asia/Manila',
  '64': 'Pacific/Auckland',
  '65': 'Asia/Singapore',
  '66': 'Asia/Bangkok',
  '81': 'Asia/Tokyo',
  '82': 'Asia/Seoul',
  '84': 'Asia/Ho_Chi_Minh',
  '86': 'Asia/Shanghai',
  '90': 'Europe/Istanbul',
  '91': 'Asia/Kolkata',
  '92': 'Asia/Karachi',
  '94': 'Asia/Colombo',
  '212': 'Africa/Casablanca',
  '234': 'Africa/Lagos',
  '254': 'Africa/Nairobi',
  '351': 'Europe/Lisbon',
  '352': 'Europe/Luxembourg',
  '353': 'Europe/Dublin',
  '354': 'Atlantic/Reykjavik',
  '358': 'Europe/Helsinki',
  '359': 'Europe/Sofia',
  '370': 'Europe/Vilnius',
  '371': 'Europe/Riga',
  '372': 'Europe/Tallinn',
  '380': 'Europe/Kiev',
  '385': 'Europe/Zagreb',
  '386': 'Europe/Ljubljana',
  '420': 'Europe/Prague',
  '421': 'Europe/Bratislava',
  '502': 'America/Guatemala',
  '503': 'America/El_Salvador',
  '506': 'America/Costa_Rica',
  '507': 'America/Panama',
  '593': 'America/Guayaquil',
  '598': 'America/Montevideo',
  '852': 'Asia/Hong_Kong',
  '880': 'Asia/Dhaka',
  '886': 'Asia/Taipei',
  '966': 'Asia/Riyadh',
  '971': 'Asia/Dubai',
  '972': 'Asia/Jerusalem',
  '974': 'Asia/Qatar',
};

/** North American area codes by zone (the area's main zone where a code spans two). */
const areaCodesByZone: Record<string, string> = {
  'America/New_York':
    '201 202 203 207 212 215 216 220 223 229 234 239 240 248 252 267 272 276 283 301 302 304 305 313 315 321 326 330 ' +
    '332 336 339 347 351 352 380 386 401 404 407 410 412 413 419 423 434 440 443 445 448 470 475 478 484 502 508 513 ' +
    '516 517 518 540 551 561 567 570 571 582 585 586 603 606 607 609 610 614 616 617 631 640 645 646 656 667 678 679 ' +
    '680 681 689 703 704 706 716 717 718 724 727 728 732 734 740 743 754 757 762 770 771 772 774 781 786 802 803 804 ' +
    '810 813 814 826 828 835 838 839 843 845 848 850 854 856 857 859 860 862 863 864 865 878 904 908 910 912 914 917 ' +
    '919 929 934 937 941 943 947 948 954 959 973 978 980 984 989 ' +
    // Indiana, Michigan's Upper Peninsula and Ontario and Quebec keep Eastern time too.
    '219 260 317 463 574 765 812 930 906 226 249 263 289 343 354 365 367 382 416 418 437 438 450 468 514 519 548 579 ' +
    '581 613 647 683 705 742 753 807 819 873 905',
  'America/Chicago':
    '205 210 214 217 218 224 225 228 251 254 256 262 270 274 281 308 309 312 314 316 318 319 320 325 327 331 334 337 ' +
    '346 361 364 402 405 409 414 417 430 432 447 464 469 479 501 504 507 512 515 531 534 539 557 563 572 573 580 601 ' +
    '605 608 612 615 618 620 629 630 636 641 651 659 660 662 682 701 708 712 713 715 726 731 737 763 769 773 779 785 ' +
    '806 815 816 817 830 832 847 870 872 901 903 913 918 920 931 936 938 940 945 952 956 972 975 979 985 ' +
    '204 431 584',
  'America/Denver': '303 307 385 406 435 505 575 719 720 801 915 970 983 208 986 403 368 587 780 825',
  'America/Phoenix': '480 520 602 623 928',
  'America/Los_Angeles':
    '206 209 213 253 279 310 323 341 350 360 408 415 424 425 442 458 503 509 510 530 541 559 562 564 619 626 628 650 ' +
    '657 661 669 702 707 714 725 747 760 775 805 818 820 831 840 858 909 916 925 949 951 971 236 250 257 604 672 778',
  'America/Regina': '306 474 639',
  'America/Halifax': '782 902 428 506',
  'America/St_Johns': '709 879',
  'America/Anchorage': '907',
  'Pacific/Honolulu': '808',
  'America/Puerto_Rico': '787 939 340',
  'America/Nassau': '242',
  'America/Barbados': '246',
  'Atlantic/Bermuda': '441',
  'America/Jamaica': '876 658',
  'America/Santo_Domingo': '809 829 849',
  'America/Port_of_Spain': '868',
  'Pacific/Guam': '671 670',
  'Pacific/Pago_Pago': '684',
};

const areaZones = new Map<string, string>();
for (const [zone, codes] of Object.entries(areaCodesByZone))
  for (const code of codes.split(' ')) if (!areaZones.has(code)) areaZones.set(code, zone);

/** Every zone the table names (for its test). */
export const tableZones = (): string[] => [...new Set([...Object.values(countryZones), ...areaZones.values()])];

/**
 * The time zone of a phone number in E.164 (`+` and digits): a North
 * American number (`+1`) by its area code, another by its country calling
 * code when the country has one zone. Undefined when the table does not say
 * (an email handle, a multi-zone country such as Mexico, Brazil, Russia or
 * Australia, an area code it does not list).
 */
export function zoneOfNumber(number: string): string | undefined {
  if (!/^\+\d{4,15}$/.test(number)) return undefined;
  if (number.startsWith('+1')) return areaZones.get(number.slice(2, 5));
  for (let length = 1; length <= 3; length++) {
    const zone = countryZones[number.slice(1, 1 + length)];
    if (zone) return zone;
  }
  return undefined;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** The wall-clock reading of `at` (epoch ms) in `zone`, as the epoch ms that reading would be in UTC. */
function wallClock(zone: string, at: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(zone).formatToParts(at)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
}

const minutesOf = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
const minuteMs = 60_000;
const dayMs = 24 * 60 * minuteMs;

/**
 * The first instant at or after the wall-clock time `wall` (as `wallClock`
 * gives it) in `zone`. A time the clocks skip (spring forward) is taken as
 * the instant after the jump; one they pass twice (fall back), the first.
 */
function instantOf(zone: string, wall: number): number {
  const first = wall - (wallClock(zone, wall) - wall);
  const second = wall - (wallClock(zone, first) - first);
  const fits = [first, second].filter((t) => wallClock(zone, t) - t === wall - t).sort((a, b) => a - b);
  return fits[0] ?? Math.max(first, second);
}

/**
 * When the quiet window that `at` (epoch ms) falls in, in `zone`, ends
 * (epoch ms); null when `at` is outside the window. A window whose start and
 * end are equal is empty.
 */
export function quietUntil(window: QuietWindow, zone: string, at: number): number | null {
  const start = minutesOf(window.start);
  const end = minutesOf(window.end);
  if (start === end) return null;
  const wall = wallClock(zone, at);
  const minute = Math.floor((wall % dayMs) / minuteMs);
  const quiet = start < end ? minute >= start && minute < end : minute >= start || minute < end;
  if (!quiet) return null;
  const midnight = wall - (wall % dayMs);
  // The window's end is today's when it is still ahead, tomorrow's otherwise (an evening inside a window past midnight).
  const endWall = midnight + end * minuteMs + (minute >= end ? dayMs : 0);
  return Math.max(instantOf(zone, endWall), at + 1);
}

/**
 * When `durationMs` of sending time outside the quiet window has passed
 * from `from` (epoch ms), in `zone`: the time of a drain that stops for the
 * nights it spans.
 */
export function afterQuietHours(window: QuietWindow, zone: string, from: number, durationMs: number): number {
  const start = minutesOf(window.start);
  if (start === minutesOf(window.end)) return from + durationMs;
  let at = from;
  let left = durationMs;
  // Each turn crosses one night at least; a drain a year long is past any estimate worth the steps.
  for (let nights = 0; nights < 400; nights++) {
    at = quietUntil(window, zone, at) ?? at;
    const wall = wallClock(zone, at);
    const minute = Math.floor((wall % dayMs) / minuteMs);
    const nextStart = instantOf(zone, wall - (wall % dayMs) + start * minuteMs + (minute >= start ? dayMs : 0));
    if (at + left <= nextStart) return at + left;
    left -= nextStart - at;
    at = nextStart;
  }
  return at + left;
}
