"""Generate the sample datasheet knowledge_base/ax200-datasheet.pdf.

The Aurora AX-200 and Nordlicht Instruments are invented; the PDF is sample
content for the RAG system's first run. The output is deterministic: the
creation date is fixed, so re-running the script yields the same file.

Note: section 2.1 deliberately states the logic supply as VCC = 5 V, while the
user manual and the JSON spec sheet state VCC = 3.3 V. This conflict is
intentional and is used to test how the system handles contradicting sources.

Usage:
    python scripts/make_sample_pdf.py [output_path]

Requires fpdf2 (pip install fpdf2==2.8.9). Only core fonts (Helvetica) and
Latin-1 text are used, so no font files are needed.
"""

from __future__ import annotations

import sys
from datetime import datetime, UTC
from pathlib import Path

try:
    from fpdf import FPDF
    from fpdf import FontFace
except ImportError:  # pragma: no cover - helpful message only
    sys.exit("fpdf2 is required: pip install fpdf2==2.8.9")

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "knowledge_base" / "ax200-datasheet.pdf"

TITLE = "Aurora AX-200 Datasheet, revision 2"
CREATION_DATE = datetime(2026, 4, 15, 9, 0, 0, tzinfo=UTC)

FONT = "Helvetica"


class Datasheet(FPDF):
    def header(self) -> None:
        self.set_font(FONT, "B", 9)
        self.set_text_color(90, 90, 90)
        self.cell(0, 6, "Nordlicht Instruments", align="L")
        self.set_x(self.l_margin)
        self.set_font(FONT, "", 9)
        self.cell(0, 6, "Aurora AX-200 Sensor Gateway - Datasheet - Rev. 2", align="R")
        self.ln(8)
        self.set_draw_color(0, 90, 140)
        self.line(self.l_margin, self.get_y(), self.w - self.r_margin, self.get_y())
        self.ln(4)
        self.set_text_color(0, 0, 0)

    def footer(self) -> None:
        self.set_y(-15)
        self.set_font(FONT, "", 8)
        self.set_text_color(90, 90, 90)
        self.cell(0, 8, "Document NI-DS-AX200, revision 2, April 2026. Subject to change without notice.", align="L")
        self.set_x(self.l_margin)
        self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="R")
        self.set_text_color(0, 0, 0)

    # -- helpers -----------------------------------------------------------
    def section(self, title: str, level: int = 0) -> None:
        """Heading that is also registered as a PDF outline entry."""
        self.start_section(title, level=level)
        if level == 0:
            self.ln(2)
            self.set_font(FONT, "B", 14)
            self.set_text_color(0, 90, 140)
            self.cell(0, 9, title, new_x="LMARGIN", new_y="NEXT")
        else:
            self.ln(1)
            self.set_font(FONT, "B", 11.5)
            self.set_text_color(0, 0, 0)
            self.cell(0, 7, title, new_x="LMARGIN", new_y="NEXT")
        self.set_text_color(0, 0, 0)
        self.ln(1)

    def para(self, text: str) -> None:
        self.set_font(FONT, "", 10)
        self.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def bullets(self, items: list[str]) -> None:
        self.set_font(FONT, "", 10)
        for item in items:
            self.set_x(self.l_margin + 3)
            self.cell(4, 5, "-")
            self.multi_cell(0, 5, item, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def spec_table(self, rows: list[tuple[str, ...]], widths: tuple[int, ...]) -> None:
        self.set_font(FONT, "", 9.5)
        with self.table(
            col_widths=widths,
            text_align="LEFT",
            line_height=5.5,
            headings_style=FontFace(emphasis="BOLD", fill_color=(225, 235, 242)),
            first_row_as_headings=True,
            borders_layout="HORIZONTAL_LINES",
        ) as table:
            for row in rows:
                tr = table.row()
                for value in row:
                    tr.cell(value)
        self.ln(4)


def build(output: Path) -> Path:
    pdf = Datasheet(orientation="P", unit="mm", format="A4")
    pdf.set_title(TITLE)
    pdf.set_author("Nordlicht Instruments")
    pdf.set_subject("Datasheet for the Aurora AX-200 sensor gateway")
    pdf.set_keywords("Aurora AX-200, sensor gateway, RS-485, Modbus, datasheet")
    pdf.set_creator("scripts/make_sample_pdf.py")
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(20, 15, 20)

    # ---- Page 1: title and general description --------------------------
    pdf.add_page()
    pdf.set_font(FONT, "B", 22)
    pdf.cell(0, 12, "Aurora AX-200 Sensor Gateway", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(FONT, "", 12)
    pdf.set_text_color(90, 90, 90)
    pdf.cell(0, 7, "Datasheet - revision 2 - firmware 2.4.1", new_x="LMARGIN", new_y="NEXT")
    pdf.set_text_color(0, 0, 0)
    pdf.ln(4)

    pdf.section("1 General description")
    pdf.para(
        "The Aurora AX-200 from Nordlicht Instruments is a compact sensor gateway for "
        "DIN-rail mounting. It acts as Modbus RTU master on an isolated RS-485 bus, polls "
        "up to 8 sensors at a configurable sampling interval and forwards the readings over "
        "10/100 Mbit/s Ethernet to a supervisory system using Modbus TCP, MQTT (optionally "
        "over TLS) or an HTTPS REST API."
    )
    pdf.para(
        "Measurements are stored in an internal buffer with a capacity of 50,000 values, so "
        "no data is lost while the network is unavailable. Each sensor channel has a low and "
        "a high alarm threshold with hysteresis and delay; active alarms switch a changeover "
        "relay and are reported on all data interfaces. The gateway is configured entirely "
        "through its built-in web interface, which is also used to install signed firmware "
        "updates (page System > Update)."
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Features", new_x="LMARGIN", new_y="NEXT")
    pdf.bullets(
        [
            "RS-485 sensor bus, Modbus RTU master, up to 8 sensors, 1.5 kV galvanic isolation",
            "Ethernet 10/100 Mbit/s: Modbus TCP server, MQTT client (TLS on port 8883), HTTPS REST API",
            "Sampling interval 1 s to 3600 s, default 60 s",
            "Per-channel low/high alarm thresholds with hysteresis and delay",
            "Alarm relay output, changeover contact, 30 V DC / 1 A",
            "Main input 12 - 24 V DC, reverse polarity protected",
            "Operating temperature -20 to +60 deg C",
            "35 mm DIN-rail housing, 90 x 72 x 60 mm, 210 g",
        ]
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Typical applications", new_x="LMARGIN", new_y="NEXT")
    pdf.bullets(
        [
            "Temperature, humidity and pressure monitoring in buildings and cold storage",
            "Condition monitoring of pumps, compressors and process equipment",
            "Collection of sensor data for SCADA, building management and cloud platforms",
        ]
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Front panel", new_x="LMARGIN", new_y="NEXT")
    pdf.para(
        "Five status LEDs (PWR, RUN, BUS, NET, ALM), the recessed RESET button and the RJ45 "
        "Ethernet socket. A short press on RESET (less than 2 s) restarts the gateway; holding "
        "RESET for 10 s restores the factory settings, including the default IP address "
        "192.168.10.50."
    )

    # ---- Page 2: electrical characteristics -----------------------------
    pdf.add_page()
    pdf.section("2 Electrical characteristics")
    pdf.para("All values apply over the full operating temperature range of -20 to +60 deg C unless otherwise noted.")
    pdf.section("2.1 Power", level=1)
    pdf.para(
        "The gateway is supplied through terminal X1 (+V, GND) from a SELV power supply. "
        "The internal logic supply is VCC = 5 V, generated on-board from the main input by "
        "a switching regulator. Terminal X3 passes the main input voltage through to the "
        "connected sensors."
    )
    pdf.spec_table(
        [
            ("Parameter", "Min.", "Typ.", "Max.", "Unit"),
            ("Main input voltage, nominal (X1)", "12", "-", "24", "V DC"),
            ("Main input voltage, permissible range", "10.8", "-", "26.4", "V DC"),
            ("Power consumption (gateway only)", "-", "2.5", "4.0", "W"),
            ("Sensor power output current, total (X3)", "-", "-", "0.5", "A"),
            ("Input fuse (self-resetting PTC)", "-", "1", "-", "A"),
            ("Reverse polarity protection", "-", "yes", "-", "-"),
            ("Undervoltage / overvoltage warning (E03)", "10.8", "-", "26.4", "V DC"),
        ],
        (70, 20, 20, 20, 20),
    )

    pdf.section("2.2 Interfaces", level=1)
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "RS-485 sensor bus (X2: A, B, COM, SH)", new_x="LMARGIN", new_y="NEXT")
    pdf.spec_table(
        [
            ("Parameter", "Value"),
            ("Protocol", "Modbus RTU, gateway is master"),
            ("Number of sensors", "max. 8"),
            ("Sensor addresses", "1 to 247, unique per sensor"),
            ("Baud rates", "9600 (default), 19200, 38400, 57600, 115200"),
            ("Character format", "8N1 (default)"),
            ("Termination", "120 Ohm, switchable with DIP switch S1-1 (default ON)"),
            ("Fail-safe bias", "switchable with DIP switch S1-2 (default ON)"),
            ("Galvanic isolation", "1.5 kV"),
            ("Max. bus length", "1,000 m at 9600 baud, shielded twisted pair"),
        ],
        (55, 95),
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Ethernet (RJ45)", new_x="LMARGIN", new_y="NEXT")
    pdf.spec_table(
        [
            ("Parameter", "Value"),
            ("Speed", "10/100 Mbit/s, auto-MDI/MDIX"),
            ("Default IP address", "192.168.10.50, subnet mask 255.255.255.0"),
            ("Default gateway / DHCP", "192.168.10.1 / off"),
            ("Web interface, REST API", "HTTPS, port 443 (HTTP port 80 redirects)"),
            ("Modbus TCP server", "port 502"),
            ("MQTT client", "port 1883, or port 8883 with TLS"),
            ("Time synchronisation", "NTP, up to two servers"),
        ],
        (55, 95),
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Alarm relay (X4: NO, C, NC)", new_x="LMARGIN", new_y="NEXT")
    pdf.spec_table(
        [
            ("Parameter", "Value"),
            ("Contact type", "1 changeover contact"),
            ("Switching capacity", "30 V DC / 1 A, resistive load"),
        ],
        (55, 95),
    )

    # ---- Page 3/4: environmental and ordering ---------------------------
    pdf.add_page()
    pdf.section("3 Environmental")
    pdf.spec_table(
        [
            ("Parameter", "Value"),
            ("Operating temperature", "-20 to +60 deg C"),
            ("Storage temperature", "-40 to +85 deg C"),
            ("Relative humidity", "5 % to 95 %, non-condensing"),
            ("Altitude", "up to 2,000 m"),
            ("Degree of protection", "IP20 (install in an enclosure of at least IP54 outdoors)"),
            ("Mounting", "35 mm DIN rail (EN 60715)"),
            ("Dimensions (H x W x D)", "90 x 72 x 60 mm"),
            ("Weight", "210 g"),
            ("Housing material", "Polycarbonate, UL94 V-0"),
            ("Terminals", "Pluggable screw terminals, 0.5 - 1.5 mm2, torque 0.5 Nm"),
        ],
        (55, 95),
    )
    pdf.set_font(FONT, "B", 10)
    pdf.cell(0, 6, "Certifications and standards", new_x="LMARGIN", new_y="NEXT")
    pdf.bullets(
        [
            "CE (EMC Directive 2014/30/EU, RoHS Directive 2011/65/EU)",
            "UKCA",
            "FCC Part 15, Class A",
            "EN IEC 61000-6-2 (immunity, industrial environments)",
            "EN IEC 61000-6-4 (emission, industrial environments)",
            "RoHS compliant (EU 2015/863)",
        ]
    )

    pdf.section("4 Ordering information")
    pdf.spec_table(
        [
            ("Order code", "Description"),
            ("NI-AX200-01", "Aurora AX-200 sensor gateway, firmware 2.4.1, with terminal set X1 - X4"),
            ("NI-AX200-01-KIT", "Aurora AX-200 sensor gateway with NI-PSU24-1A power supply"),
            ("NI-PSU24-1A", "DIN-rail power supply, 24 V DC, 1 A, SELV output"),
            ("NI-ACC-TERM", "Spare set of pluggable screw terminals X1 - X4"),
        ],
        (40, 110),
    )
    pdf.para(
        "Scope of delivery (NI-AX200-01): gateway with fitted terminals, quick start leaflet. "
        "The type label shows the serial number, the MAC address and the initial administrator "
        "password. Firmware images, release notes and the user manual (NI-UM-AX200) are "
        "available from the Nordlicht Instruments support portal."
    )

    output.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(output))
    return output


def main() -> None:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT
    path = build(output)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
