// node --import ./test/register.mjs --test …: lets Node load the widget's sources as
// esbuild does (build.mjs): a .css import is its text, a .json import its value. And
// markdown.js (marked + DOMPurify, which need npm packages and a real DOM) is rendered
// as plain text here: view tests check the view, not the Markdown.
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);
