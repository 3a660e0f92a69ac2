"""factur-x: a Factur-X / ZUGFeRD e-invoice from a PDF/A-3 and its XML.

Usage: python3 -I factur-x.py INPUT.pdf INVOICE.xml OPTIONS.json OUTPUT.pdf

INPUT.pdf is PDF/A-3 (the host's steps made it so with Ghostscript);
INVOICE.xml the invoice as UN/CEFACT Cross Industry Invoice XML.
OPTIONS.json is data the host wrote: {"level": the conformance level as
Factur-X names it (MINIMUM, BASIC WL, BASIC, EN 16931, EXTENDED),
"relationship": Data or Alternative}. Writes OUTPUT.pdf: the XML embedded
as factur-x.xml (text/xml, /AFRelationship, in /AF), and the document's
XMP extended with the fx: properties Factur-X 1.0 defines and the PDF/A
extension schema that declares them. Runs inside the sandbox: both inputs
are untrusted. An XML with a DTD is refused (no entity is expanded), and
so is one whose root is not a CrossIndustryInvoice.
"""

import json
import sys
import xml.etree.ElementTree as ET

import pikepdf

FX = "urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#"
PROPERTIES = [
    ("DocumentFileName", "The name of the embedded XML document"),
    ("DocumentType", "The type of the hybrid document in capital letters, e.g. INVOICE or ORDER"),
    ("Version", "The actual version of the standard applying to the embedded XML document"),
    ("ConformanceLevel", "The conformance level of the embedded XML document"),
]


def xmp_block(level):
    props = "".join(
        '<rdf:li rdf:parseType="Resource"><pdfaProperty:name>%s</pdfaProperty:name>'
        "<pdfaProperty:valueType>Text</pdfaProperty:valueType><pdfaProperty:category>external</pdfaProperty:category>"
        "<pdfaProperty:description>%s</pdfaProperty:description></rdf:li>" % p
        for p in PROPERTIES
    )
    return (
        '<rdf:Description rdf:about="" xmlns:fx="%s">'
        "<fx:DocumentType>INVOICE</fx:DocumentType><fx:DocumentFileName>factur-x.xml</fx:DocumentFileName>"
        "<fx:Version>1.0</fx:Version><fx:ConformanceLevel>%s</fx:ConformanceLevel></rdf:Description>"
        '<rdf:Description rdf:about="" xmlns:pdfaExtension="http://www.aiim.org/pdfa/ns/extension/"'
        ' xmlns:pdfaSchema="http://www.aiim.org/pdfa/ns/schema#" xmlns:pdfaProperty="http://www.aiim.org/pdfa/ns/property#">'
        '<pdfaExtension:schemas><rdf:Bag><rdf:li rdf:parseType="Resource">'
        "<pdfaSchema:schema>Factur-X PDFA Extension Schema</pdfaSchema:schema>"
        "<pdfaSchema:namespaceURI>%s</pdfaSchema:namespaceURI><pdfaSchema:prefix>fx</pdfaSchema:prefix>"
        "<pdfaSchema:property><rdf:Seq>%s</rdf:Seq></pdfaSchema:property>"
        "</rdf:li></rdf:Bag></pdfaExtension:schemas></rdf:Description>"
    ) % (FX, level, FX, props)


def main():
    src, xml_path, opts_path, out = sys.argv[1:5]
    with open(opts_path, encoding="utf-8") as f:
        o = json.load(f)
    with open(xml_path, "rb") as f:
        invoice = f.read()
    if b"<!DOCTYPE" in invoice or b"<!ENTITY" in invoice:
        sys.exit("the invoice XML has a DTD; Factur-X XML has none")
    try:
        root = ET.fromstring(invoice)
    except ET.ParseError as e:
        sys.exit("the invoice is not well-formed XML: %s" % e)
    if not root.tag.endswith("}CrossIndustryInvoice"):
        sys.exit("the invoice's root element is %s, not a Cross Industry Invoice (rsm:CrossIndustryInvoice)" % root.tag)
    with pikepdf.open(src) as pdf:
        spec = pikepdf.AttachedFileSpec(pdf, invoice, description="Factur-X invoice", filename="factur-x.xml", mime_type="text/xml")
        spec.obj.AFRelationship = pikepdf.Name("/" + o["relationship"])
        pdf.attachments["factur-x.xml"] = spec
        af = pdf.Root.get("/AF")
        if not isinstance(af, pikepdf.Array):
            af = pikepdf.Array()
        af.append(spec.obj)
        pdf.Root.AF = af
        xmp = pdf.Root.Metadata.read_bytes().decode("utf-8")
        end = xmp.rfind("</rdf:RDF>")
        if end < 0:
            sys.exit("the PDF/A's XMP has no rdf:RDF")
        xmp = xmp[:end] + xmp_block(o["level"]) + xmp[end:]
        pdf.Root.Metadata = pdf.make_stream(xmp.encode("utf-8"), Type=pikepdf.Name.Metadata, Subtype=pikepdf.Name.XML)
        # The XMP stays uncompressed, as Ghostscript wrote it: readers
        # (and the host's check) find the PDF/A part in it.
        pdf.save(out, compress_streams=False)


if __name__ == "__main__":
    main()
